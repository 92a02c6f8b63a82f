"""NT descriptions: each NT's kind, scope, parameters, registers and run-time configuration,
which the gateware (supernic.hw.nt), the models (supernic.sim.nt) and the driver share."""
