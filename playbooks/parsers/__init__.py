"""Pure parsers for tool output: text in, typed data out, never I/O, never an exception.

Each tolerates real variation (headers or not, units or not, ``[N/A]``, driver and
systemd versions) and skips lines it cannot read; hypothesis fuzzes every one of them.
"""
