"""What a campaign measures: its environment kinds (a simulated DUT, Knot on loopback, an emulated chain, a
real testbed), each in a module of its own here."""
