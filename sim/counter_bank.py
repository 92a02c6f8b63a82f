"""Model of the counter bank (hw/nt/counter_bank.py), and its state in a capture.

:class:`CounterBankModel` is what the bank promises: plain counters, an event adds 1 and a
clear in the same cycle wins. The hardware keeps each count as a memory row plus a small delta
and a ``cleared`` flag; :func:`bank_counts` and :func:`store_bank_counts` turn a state-map
decode (sw/desc/statemap.py) of a transformed NT into counts and back, for the NT models'
hand-off to and from the hardware.
"""

__all__ = ["CounterBankModel", "bank_counts", "store_bank_counts"]


class CounterBankModel:
    def __init__(self, count, width=64):
        self.width = width
        self.counts = [0] * count

    def step(self, inc, clear):
        """One clock edge: ``inc`` and ``clear`` are bit masks over the counters."""
        for k in range(len(self.counts)):
            if clear >> k & 1:
                self.counts[k] = 0
            elif inc >> k & 1:
                self.counts[k] = (self.counts[k] + 1) % 2 ** self.width

    def value(self, index):
        return self.counts[index] if index < len(self.counts) else 0


def bank_counts(values, bank, count, width=64):
    """The counts of the bank named ``bank`` (its path in the NT) in the decode ``values``."""
    rows = values[f"{bank}.mem"]
    cleared = values.get(f"{bank}.cleared", 0)     # a bank without clears has no flags
    return [((0 if cleared >> k & 1 else rows[k]) + values[f"{bank}.delta{k}"]) % 2 ** width
            for k in range(count)]


def store_bank_counts(values, bank, counts):
    """Write ``counts`` into the decode ``values`` as the bank would hold them: in the memory,
    with every delta and ``cleared`` flag 0."""
    values[f"{bank}.mem"] = list(counts)
    if f"{bank}.cleared" in values:
        values[f"{bank}.cleared"] = 0
    for k in range(len(counts)):
        values[f"{bank}.delta{k}"] = 0
