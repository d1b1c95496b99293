#include "xdp/neighbour.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <optional>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "net.hpp"
#include "xdp/program.hpp"

namespace xlatperf::xdp {
namespace {

class Netlink {
public:
    Netlink() : fd_(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) {
        if (fd_ < 0) throw XdpError(std::string("cannot open rtnetlink: ") + std::strerror(errno));
    }
    ~Netlink() { close(fd_); }
    Netlink(const Netlink&) = delete;
    Netlink& operator=(const Netlink&) = delete;

    // Sends one request and calls `each` for every answer message until DONE (or
    // the single answer of a non-dump request).
    template <class F>
    void request(nlmsghdr* message, F each) {
        message->nlmsg_seq = ++sequence_;
        if (send(fd_, message, message->nlmsg_len, 0) < 0) {
            throw XdpError(std::string("rtnetlink send: ") + std::strerror(errno));
        }
        std::vector<char> buffer(1 << 16);
        for (;;) {
            const ssize_t got = recv(fd_, buffer.data(), buffer.size(), 0);
            if (got < 0) throw XdpError(std::string("rtnetlink recv: ") + std::strerror(errno));
            int left = static_cast<int>(got);
            for (auto* h = reinterpret_cast<nlmsghdr*>(buffer.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
                if (h->nlmsg_seq != sequence_) continue;
                if (h->nlmsg_type == NLMSG_DONE) return;
                if (h->nlmsg_type == NLMSG_ERROR) {
                    const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
                    if (e->error == 0) return;
                    throw XdpError(std::string("rtnetlink: ") + std::strerror(-e->error));
                }
                each(h);
                if ((h->nlmsg_flags & NLM_F_MULTI) == 0) return;
            }
        }
    }

private:
    int fd_;
    std::uint32_t sequence_ = 0;
};

std::size_t address_length(int family) { return family == AF_INET ? 4 : 16; }

const void* address_bytes(const SockAddr& a) {
    return a.family() == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr)
                                 : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
}

SockAddr with_address(int family, const void* bytes) {
    SockAddr out;
    if (family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
        sin->sin_family = AF_INET;
        std::memcpy(&sin->sin_addr, bytes, 4);
        out.length = sizeof(sockaddr_in);
    } else {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        sin6->sin6_family = AF_INET6;
        std::memcpy(&sin6->sin6_addr, bytes, 16);
        out.length = sizeof(sockaddr_in6);
    }
    return out;
}

struct Route {
    int oif = 0;
    std::optional<SockAddr> gateway;
};

Route route_get(Netlink& nl, const SockAddr& destination) {
    struct {
        nlmsghdr header;
        rtmsg route;
        char attributes[64];
    } request{};
    const int family = destination.family();
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    request.header.nlmsg_type = RTM_GETROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.route.rtm_family = static_cast<unsigned char>(family);
    request.route.rtm_dst_len = static_cast<unsigned char>(8 * address_length(family));
    auto* attribute = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&request) + NLMSG_ALIGN(request.header.nlmsg_len));
    attribute->rta_type = RTA_DST;
    attribute->rta_len = static_cast<unsigned short>(RTA_LENGTH(address_length(family)));
    std::memcpy(RTA_DATA(attribute), address_bytes(destination), address_length(family));
    request.header.nlmsg_len = NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(attribute->rta_len);
    Route route;
    nl.request(&request.header, [&](nlmsghdr* h) {
        if (h->nlmsg_type != RTM_NEWROUTE) return;
        auto* r = static_cast<rtmsg*>(NLMSG_DATA(h));
        int length = static_cast<int>(RTM_PAYLOAD(h));
        for (rtattr* a = RTM_RTA(r); RTA_OK(a, length); a = RTA_NEXT(a, length)) {
            if (a->rta_type == RTA_OIF) std::memcpy(&route.oif, RTA_DATA(a), sizeof route.oif);
            if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == address_length(family)) {
                route.gateway = with_address(family, RTA_DATA(a));
            }
        }
    });
    return route;
}

std::optional<Mac> neighbour(Netlink& nl, int ifindex, const SockAddr& address) {
    struct {
        nlmsghdr header;
        ndmsg neigh;
    } request{};
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
    request.header.nlmsg_type = RTM_GETNEIGH;
    request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    request.neigh.ndm_family = static_cast<std::uint8_t>(address.family());
    std::optional<Mac> found;
    const std::size_t n = address_length(address.family());
    nl.request(&request.header, [&](nlmsghdr* h) {
        if (h->nlmsg_type != RTM_NEWNEIGH) return;
        auto* nd = static_cast<ndmsg*>(NLMSG_DATA(h));
        if (nd->ndm_ifindex != ifindex) return;
        const auto usable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
        if ((nd->ndm_state & usable) == 0) return;
        int length = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
        bool match = false;
        std::optional<Mac> mac;
        for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(nd) + NLMSG_ALIGN(sizeof(ndmsg)));
             RTA_OK(a, length); a = RTA_NEXT(a, length)) {
            if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == n) {
                match = std::memcmp(RTA_DATA(a), address_bytes(address), n) == 0;
            }
            if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
                Mac m{};
                std::memcpy(m.data(), RTA_DATA(a), 6);
                mac = m;
            }
        }
        if (match && mac) found = mac;
    });
    return found;
}

// An empty UDP datagram to the next hop's discard port, out of `ifname`: the
// kernel resolves the neighbour to send it.
void probe(const std::string& ifname, const SockAddr& next_hop) {
    const int fd = socket(next_hop.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname.c_str(), static_cast<socklen_t>(ifname.size()));
    SockAddr target = next_hop;
    if (target.family() == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&target.storage)->sin_port = htons(9);
    } else {
        reinterpret_cast<sockaddr_in6*>(&target.storage)->sin6_port = htons(9);
    }
    sendto(fd, "", 0, MSG_DONTWAIT, target.get(), target.length);
    close(fd);
}

}  // namespace

std::string mac_text(const Mac& mac) {
    char text[18];
    std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    return text;
}

Mac interface_mac(const std::string& ifname) {
    std::ifstream in("/sys/class/net/" + ifname + "/address");
    std::string text;
    Mac mac{};
    unsigned b[6];
    if (!(in >> text) || std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) {
        throw XdpError("cannot read the MAC address of interface '" + ifname + "' (/sys/class/net/" + ifname +
                       "/address)");
    }
    for (int i = 0; i < 6; ++i) mac[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(b[i]);
    return mac;
}

NextHop resolve_next_hop(const std::string& ifname, const SockAddr& destination, double timeout_s) {
    const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (ifindex == 0) throw XdpError("no network interface '" + ifname + "' here");
    Netlink nl;
    const Route route = route_get(nl, destination);
    if (route.oif != ifindex) {
        char name[IF_NAMESIZE] = "?";
        if_indextoname(static_cast<unsigned>(route.oif), name);
        throw XdpError("the route to " + to_string(destination) + " leaves by " + name + ", not by " + ifname);
    }
    NextHop hop;
    hop.ifindex = ifindex;
    hop.on_link = !route.gateway.has_value();
    hop.gateway = route.gateway ? *route.gateway : with_address(destination.family(), address_bytes(destination));
    if (auto mac = neighbour(nl, ifindex, hop.gateway)) {
        hop.mac = *mac;
        return hop;
    }
    hop.probed = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
        probe(ifname, hop.gateway);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (auto mac = neighbour(nl, ifindex, hop.gateway)) {
            hop.mac = *mac;
            return hop;
        }
    }
    throw XdpError("the next hop " + to_string(hop.gateway) + " on " + ifname + " did not resolve (ARP/ND) in " +
                   std::to_string(timeout_s) + " s");
}

}  // namespace xlatperf::xdp
