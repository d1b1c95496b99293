#pragma once
// Where frames go: the interface's own MAC and the next hop's, from the
// kernel's routing and neighbour tables (rtnetlink: RTM_GETROUTE, then
// RTM_GETNEIGH). When the next hop has no usable entry, a probe (an empty UDP
// datagram to it, port 9 "discard", through the interface) makes the kernel
// resolve it with ARP or neighbour discovery, and the table is read again.

#include <string>

#include "address.hpp"
#include "xdp/frame.hpp"

namespace xlatperf::xdp {

struct NextHop {
    int ifindex = 0;           // the interface the route leaves by
    SockAddr gateway;          // the next hop (the server itself when on-link), port 0
    bool on_link = true;
    Mac mac{};
    bool probed = false;       // the entry was absent and a probe resolved it
};

// The MAC address of `ifname` (/sys/class/net/IF/address). Throws XdpError.
Mac interface_mac(const std::string& ifname);

// The route to `destination` and the next hop's MAC, probing up to `timeout_s`.
// Throws XdpError when the route does not leave by `ifname` or the next hop
// does not answer.
NextHop resolve_next_hop(const std::string& ifname, const SockAddr& destination, double timeout_s = 2.0);

std::string mac_text(const Mac& mac);

}  // namespace xlatperf::xdp
