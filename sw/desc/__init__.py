"""The description layer: what a design is, in plain Python (register blocks, type IDs,
configurations, NT descriptions, chain specifications). Imports nothing of Amaranth, hw, sim or
the driver; they all import it."""
