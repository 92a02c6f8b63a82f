"""The driver: transports, discovery, the device server and client, the control plane, traffic
and status; imports only supernic.desc (and runs without Amaranth). cli.py, the ``snic`` CLI,
is the application and may reach every room."""
