"""The multi-tenant NIC described: its shape, tag, register blocks and the run-time
configurations of the classifier and the scheduler. Imports only the description layer."""
