"""Reference models, packet generators, cocotb benches and the virtual device; imports
supernic.desc, hw/ (to build what it simulates) and the driver (benches drive through it)."""
