"""Models of the board blocks (hw/board/): the Ethernet MAC's framing and checks."""
