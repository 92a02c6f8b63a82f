"""Amaranth gateware (streams, parser, NTs, chains, the NIC, the transform); imports the
description layer (supernic.desc) and Amaranth, never sim/ or the driver."""
