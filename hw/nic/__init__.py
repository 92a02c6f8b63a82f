"""The multi-tenant SuperNIC in gateware: classifier, per-tenant queues and the central scheduler,
regions hosting chain personalities, the packet store, and the top level that joins them;
imports supernic.desc and hw/."""
