"""The header parser in gateware, generated from the declarations of supernic.desc.headers;
imports supernic.desc and hw/."""
