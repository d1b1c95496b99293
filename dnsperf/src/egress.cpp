#include "egress.hpp"

#include "fd.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include <linux/gen_stats.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace xlatperf {
namespace {

bool is_wildcard(const SockAddr& address) {
    if (address.family() == AF_INET) {
        return reinterpret_cast<const sockaddr_in*>(address.get())->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.get());
    return IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr);
}

const void* address_bytes(const SockAddr& address) {
    if (address.family() == AF_INET) return &reinterpret_cast<const sockaddr_in*>(address.get())->sin_addr;
    return &reinterpret_cast<const sockaddr_in6*>(address.get())->sin6_addr;
}

// A netlink request of at most 256 bytes: a header, a fixed message, attributes.
class Request {
public:
    Request(unsigned short type, unsigned short flags, const void* body, std::size_t size) {
        header()->nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(size));
        header()->nlmsg_type = type;
        header()->nlmsg_flags = static_cast<unsigned short>(NLM_F_REQUEST | flags);
        header()->nlmsg_seq = 1;
        std::memcpy(NLMSG_DATA(header()), body, size);
    }
    void add(unsigned short type, const void* data, std::size_t size) {
        const std::size_t at = NLMSG_ALIGN(header()->nlmsg_len);
        const std::size_t length = RTA_LENGTH(size);
        if (at + RTA_ALIGN(length) > sizeof buffer_) return;
        auto* attribute = reinterpret_cast<rtattr*>(buffer_ + at);
        attribute->rta_type = type;
        attribute->rta_len = static_cast<unsigned short>(length);
        std::memcpy(RTA_DATA(attribute), data, size);
        header()->nlmsg_len = static_cast<std::uint32_t>(at + RTA_ALIGN(length));
    }
    void* body() { return NLMSG_DATA(header()); }
    nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buffer_); }

private:
    alignas(nlmsghdr) char buffer_[256] = {};
};

// Sends `request` and hands every reply message to `each` until the kernel says it
// is done (one answer, or NLMSG_DONE after a dump). False on any error.
bool ask(Request& request, const std::function<void(const nlmsghdr&)>& each) {
    const Fd fd{socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)};
    if (fd.fd < 0) return false;
    const timeval limit{1, 0};
    setsockopt(fd.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    nlmsghdr* header = request.header();
    if (sendto(fd.fd, header, header->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
        return false;
    }
    const bool dump = (header->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
    std::vector<char> reply(1 << 16);
    for (;;) {
        const ssize_t got = recv(fd.fd, reply.data(), reply.size(), 0);
        if (got <= 0) return false;
        auto remaining = static_cast<unsigned>(got);
        for (auto* message = reinterpret_cast<nlmsghdr*>(reply.data()); NLMSG_OK(message, remaining);
             message = NLMSG_NEXT(message, remaining)) {
            if (message->nlmsg_type == NLMSG_DONE) return true;
            if (message->nlmsg_type == NLMSG_ERROR) {
                const auto* error = static_cast<const nlmsgerr*>(NLMSG_DATA(message));
                return error->error == 0;
            }
            each(*message);
            if (!dump) return true;
        }
    }
}

// Calls `each` for every attribute of a message whose fixed part is `fixed` bytes.
template <typename Each>
void attributes(const nlmsghdr& message, std::size_t fixed, Each each) {
    const auto* first = reinterpret_cast<const rtattr*>(static_cast<const char*>(NLMSG_DATA(&message)) + NLMSG_ALIGN(fixed));
    const int length = static_cast<int>(message.nlmsg_len) - static_cast<int>(NLMSG_LENGTH(fixed));
    int left = length;
    for (const rtattr* a = first; RTA_OK(a, left); a = RTA_NEXT(a, left)) each(*a);
}

template <typename Each>
void nested(const rtattr& parent, Each each) {
    int left = static_cast<int>(RTA_PAYLOAD(&parent));
    for (const rtattr* a = static_cast<const rtattr*>(RTA_DATA(&parent)); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
        each(*a);
    }
}

}  // namespace

int route_device(const SockAddr& server, const SockAddr& source) {
    rtmsg route{};
    const bool v4 = server.family() == AF_INET;
    const std::size_t size = v4 ? sizeof(in_addr) : sizeof(in6_addr);
    route.rtm_family = static_cast<unsigned char>(server.family());
    route.rtm_dst_len = static_cast<unsigned char>(size * 8);
    const bool from = source.length > 0 && !is_wildcard(source) && source.family() == server.family();
    if (from) route.rtm_src_len = static_cast<unsigned char>(size * 8);
    Request request(RTM_GETROUTE, 0, &route, sizeof route);
    request.add(RTA_DST, address_bytes(server), size);
    if (from) request.add(RTA_SRC, address_bytes(source), size);
    int index = 0;
    ask(request, [&index](const nlmsghdr& message) {
        if (message.nlmsg_type != RTM_NEWROUTE) return;
        attributes(message, sizeof(rtmsg), [&index](const rtattr& a) {
            if (a.rta_type == RTA_OIF) std::memcpy(&index, RTA_DATA(&a), sizeof index);
        });
    });
    return index;
}

std::vector<int> egress_devices(const SockAddr& server, const std::vector<SockAddr>& sources) {
    std::vector<int> devices;
    for (const SockAddr& source : sources) {
        const int index = route_device(server, source);
        if (index > 0 && std::find(devices.begin(), devices.end(), index) == devices.end()) devices.push_back(index);
    }
    return devices;
}

DeviceDrops read_device_drops(int index) {
    DeviceDrops out;
    out.index = index;
    ifinfomsg link{};
    link.ifi_index = index;
    Request link_request(RTM_GETLINK, 0, &link, sizeof link);
    bool link_read = false;
    const bool link_ok = ask(link_request, [&out, &link_read](const nlmsghdr& message) {
        if (message.nlmsg_type != RTM_NEWLINK) return;
        attributes(message, sizeof(ifinfomsg), [&out, &link_read](const rtattr& a) {
            if (a.rta_type == IFLA_IFNAME) {
                out.name.assign(static_cast<const char*>(RTA_DATA(&a)), strnlen(static_cast<const char*>(RTA_DATA(&a)), RTA_PAYLOAD(&a)));
            } else if (a.rta_type == IFLA_STATS64 && RTA_PAYLOAD(&a) >= sizeof(rtnl_link_stats64)) {
                rtnl_link_stats64 stats{};
                std::memcpy(&stats, RTA_DATA(&a), sizeof stats);
                out.tx_dropped = stats.tx_dropped;
                link_read = true;
            }
        });
    });
    tcmsg qdisc{};
    qdisc.tcm_family = AF_UNSPEC;
    qdisc.tcm_ifindex = index;
    Request qdisc_request(RTM_GETQDISC, NLM_F_DUMP, &qdisc, sizeof qdisc);
    bool root_read = false;
    const bool qdisc_ok = ask(qdisc_request, [&out, &root_read, index](const nlmsghdr& message) {
        if (message.nlmsg_type != RTM_NEWQDISC) return;
        const auto* tc = static_cast<const tcmsg*>(NLMSG_DATA(&message));
        if (tc->tcm_ifindex != index || tc->tcm_parent != TC_H_ROOT) return;
        root_read = true;
        bool stats2 = false;
        attributes(message, sizeof(tcmsg), [&out, &stats2](const rtattr& a) {
            if (a.rta_type == TCA_KIND) {
                out.qdisc.assign(static_cast<const char*>(RTA_DATA(&a)), strnlen(static_cast<const char*>(RTA_DATA(&a)), RTA_PAYLOAD(&a)));
            } else if (a.rta_type == TCA_STATS2) {
                nested(a, [&out, &stats2](const rtattr& s) {
                    if (s.rta_type == TCA_STATS_QUEUE && RTA_PAYLOAD(&s) >= sizeof(gnet_stats_queue)) {
                        gnet_stats_queue queue{};
                        std::memcpy(&queue, RTA_DATA(&s), sizeof queue);
                        out.qdisc_drops = queue.drops;
                        stats2 = true;
                    }
                });
            } else if (a.rta_type == TCA_STATS && !stats2 && RTA_PAYLOAD(&a) >= sizeof(tc_stats)) {
                tc_stats stats{};
                std::memcpy(&stats, RTA_DATA(&a), sizeof stats);
                out.qdisc_drops = stats.drops;
            }
        });
    });
    // A device without a root qdisc in the dump (none attached) has nothing to drop there.
    out.read = link_ok && link_read && qdisc_ok;
    if (!root_read) out.qdisc.clear();
    return out;
}

EgressDevice egress_delta(const DeviceDrops& before, const DeviceDrops& after) {
    EgressDevice out;
    out.name = after.name.empty() ? before.name : after.name;
    out.qdisc = after.qdisc;
    out.read = before.read && after.read && before.index == after.index;
    if (!out.read) return out;
    out.qdisc_drops = after.qdisc_drops - std::min(after.qdisc_drops, before.qdisc_drops);
    out.tx_dropped = after.tx_dropped - std::min(after.tx_dropped, before.tx_dropped);
    return out;
}

}  // namespace xlatperf
