"""A rack of SuperNICs on Ray: the switch model, a NIC advanced in lockstep windows, and the
rack that runs them (SuperNIC, arXiv 2109.07744, "Distributed SuperNIC")."""
