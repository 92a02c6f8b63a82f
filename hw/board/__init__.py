"""From the NIC to a board: the Ethernet MAC (GMII and RGMII), the clocking, the register bus
over the board's UART, and the board tops that ``snic build --board`` turns into bitstreams."""
