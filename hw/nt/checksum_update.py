"""Internet checksum arithmetic in gateware: ones'-complement sums and incremental updates.

RFC 1071 defines the checksum as the ones'-complement of the ones'-complement sum of 16-bit
words. RFC 1624 §3 (eqn. 3) updates it when a field changes from ``m`` to ``m'`` without
re-reading the packet: ``HC' = ~(~HC + ~m + m')``. A 32-bit field (an IPv4 address) is two
16-bit words; the same rule applies word by word, and the sum is order-free.

UDP over IPv4 may carry checksum 0, meaning "not computed" (RFC 768); an update must leave it 0,
and a computed UDP checksum of 0 is sent as 0xFFFF. :func:`udp_checksum_update` does both.

Each function returns an Amaranth value and adds the signals it needs to ``m.d.comb``; a chain
of end-around-carry adders is short enough for one cycle at 16 bits.
"""

from amaranth.hdl import Mux, Signal

__all__ = ["ones_add", "ones_sum", "checksum_update", "udp_checksum_update", "words16"]


def ones_add(m, a, b, name="ones"):
    """``a +' b``: 16-bit ones'-complement addition (end-around carry)."""
    total = Signal(17, name=f"{name}_sum")
    out = Signal(16, name=name)
    m.d.comb += [total.eq(a + b), out.eq(total[:16] + total[16])]
    return out


def ones_sum(m, words, name="ones"):
    """Ones'-complement sum of 16-bit values, as a balanced tree of end-around-carry adders."""
    words = list(words)
    if not words:
        raise ValueError("Ones' sum must have at least one word, not []")
    level = 0
    while len(words) > 1:
        nxt = []
        for i in range(0, len(words) - 1, 2):
            nxt.append(ones_add(m, words[i], words[i + 1], name=f"{name}_l{level}_{i // 2}"))
        if len(words) % 2:
            nxt.append(words[-1])
        words = nxt
        level += 1
    return words[0]


def words16(value, width):
    """Split a ``width``-bit value (a multiple of 16, network order: most significant word
    first) into its 16-bit words."""
    if width % 16:
        raise ValueError(f"Width must be a multiple of 16, not {width!r}")
    return [value[width - 16 * (k + 1):width - 16 * k] for k in range(width // 16)]


def checksum_update(m, checksum, old_words, new_words, name="csum"):
    """RFC 1624 eqn. 3: the checksum after 16-bit words ``old_words`` become ``new_words``."""
    if len(old_words) != len(new_words):
        raise ValueError("Old and new words must pair up, not "
                         f"{len(old_words)} and {len(new_words)} words")
    terms = [~checksum & 0xFFFF]
    for old, new in zip(old_words, new_words):
        terms += [~old & 0xFFFF, new]
    result = Signal(16, name=name)
    m.d.comb += result.eq(~ones_sum(m, terms, name=f"{name}_t") & 0xFFFF)
    return result


def udp_checksum_update(m, checksum, old_words, new_words, name="udp_csum"):
    """As :func:`checksum_update`, but 0 (no checksum, RFC 768) stays 0 and a result of 0 is
    sent as 0xFFFF."""
    updated = checksum_update(m, checksum, old_words, new_words, name=name)
    result = Signal(16, name=f"{name}_out")
    m.d.comb += result.eq(Mux(checksum == 0, 0, Mux(updated == 0, 0xFFFF, updated)))
    return result
