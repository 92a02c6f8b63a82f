"""Internet checksum arithmetic for the models (RFC 1071, RFC 1624), on plain ints and bytes."""

__all__ = ["ones_add", "ones_sum", "internet_checksum", "checksum_update",
           "udp_checksum_update", "words16"]


def ones_add(a, b):
    s = a + b
    return (s & 0xFFFF) + (s >> 16)


def ones_sum(words):
    total = 0
    for w in words:
        total = ones_add(total, w)
    return total


def words16(data: bytes):
    """16-bit big-endian words of ``data``, zero-padded to an even length (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def internet_checksum(data: bytes):
    return ~ones_sum(words16(data)) & 0xFFFF


def checksum_update(checksum, old_words, new_words):
    """RFC 1624 eqn. 3: ``HC' = ~(~HC + ~m + m')`` over paired 16-bit words."""
    total = ~checksum & 0xFFFF
    for old, new in zip(old_words, new_words, strict=True):
        total = ones_add(ones_add(total, ~old & 0xFFFF), new)
    return ~total & 0xFFFF


def udp_checksum_update(checksum, old_words, new_words):
    """UDP: 0 means no checksum and stays 0; a computed 0 is sent as 0xFFFF (RFC 768)."""
    if checksum == 0:
        return 0
    return checksum_update(checksum, old_words, new_words) or 0xFFFF
