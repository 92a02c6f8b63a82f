"""Python models of the multi-tenant NIC blocks."""
