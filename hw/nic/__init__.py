"""The multi-tenant SuperNIC: classifier, per-tenant queues and the central scheduler, regions
hosting chain personalities, the packet store, and the top level that joins them."""
