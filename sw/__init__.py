"""supernic: a generator and simulator for multi-tenant FPGA SmartNICs."""
