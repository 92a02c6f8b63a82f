"""supernic: a generator and simulator for multi-tenant FPGA SmartNICs. The root holds the
package's base (cache.py, toolchain.py), which imports nothing of the package."""
