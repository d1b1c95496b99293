"""RFC 9693 (stateful NATxy gateways) with DNS: the two phases, the four measurements and their searches."""
