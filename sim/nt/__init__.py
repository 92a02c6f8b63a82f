"""Python models of the network tasks (one per hardware NT, same configuration API); imports
supernic.desc, sim/ and hw/."""
