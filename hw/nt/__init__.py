"""Network tasks in gateware: the NT contract (task.py) and the library, each NT subclassing its
description in supernic.desc.nt; imports supernic.desc and hw/."""
