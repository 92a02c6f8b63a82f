"""Benchmarks behind ``snic bench``, fuzz campaigns, the formal and synthesis flows; imports
any room but the CLI."""
