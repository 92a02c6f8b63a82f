"""Python models of the multi-tenant NIC blocks; imports supernic.desc, sim/ and hw/."""
