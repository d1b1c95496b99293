#include "gso.hpp"

#include "egress.hpp"

#include "fd.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace xlatperf {
namespace {

// ethtool's SIOCETHTOOL on `device` with `data` (a command struct); false on error.
bool ethtool(int fd, const std::string& device, void* data) {
    ifreq request{};
    std::strncpy(request.ifr_name, device.c_str(), IFNAMSIZ - 1);
    request.ifr_data = static_cast<char*>(data);
    return ioctl(fd, SIOCETHTOOL, &request) == 0;
}

// Index of feature `name` in the device's feature strings, -1 when absent or unreadable.
int feature_index(int fd, const std::string& device, const std::string& name) {
    std::vector<std::uint64_t> info_buffer(1 + (sizeof(ethtool_sset_info) + sizeof(std::uint32_t)) / 8);
    auto* info = reinterpret_cast<ethtool_sset_info*>(info_buffer.data());
    info->cmd = ETHTOOL_GSSET_INFO;
    info->sset_mask = 1ULL << ETH_SS_FEATURES;
    if (!ethtool(fd, device, info) || info->sset_mask == 0) return -1;
    const std::uint32_t count = info->data[0];
    std::vector<std::uint64_t> strings_buffer(1 + (sizeof(ethtool_gstrings) + count * ETH_GSTRING_LEN) / 8);
    auto* strings = reinterpret_cast<ethtool_gstrings*>(strings_buffer.data());
    strings->cmd = ETHTOOL_GSTRINGS;
    strings->string_set = ETH_SS_FEATURES;
    strings->len = count;
    if (!ethtool(fd, device, strings)) return -1;
    for (std::uint32_t i = 0; i < count; ++i) {
        const char* text = reinterpret_cast<const char*>(strings->data) + std::size_t{i} * ETH_GSTRING_LEN;
        if (name == std::string(text, strnlen(text, ETH_GSTRING_LEN))) return static_cast<int>(i);
    }
    return -1;
}

}  // namespace

Egress egress_of(const SockAddr& server, const SockAddr& source) {
    Egress out;
    const int index = route_device(server, source);
    if (index <= 0) return out;
    char name[IF_NAMESIZE] = {};
    if (if_indextoname(static_cast<unsigned>(index), name) == nullptr) return out;
    out.device = name;
    const Fd fd{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    ifreq request{};
    std::memcpy(request.ifr_name, name, sizeof request.ifr_name);
    out.loopback = fd.fd >= 0 && ioctl(fd.fd, SIOCGIFFLAGS, &request) == 0 && (request.ifr_flags & IFF_LOOPBACK) != 0;
    return out;
}

int device_feature(const std::string& device, const std::string& name) {
    const Fd fd{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    if (fd.fd < 0) return -1;
    const int index = feature_index(fd.fd, device, name);
    if (index < 0) return -1;
    const std::size_t blocks = static_cast<std::size_t>(index) / 32 + 1;
    std::vector<std::uint64_t> buffer(1 + (sizeof(ethtool_gfeatures) + blocks * sizeof(ethtool_get_features_block)) / 8);
    auto* features = reinterpret_cast<ethtool_gfeatures*>(buffer.data());
    features->cmd = ETHTOOL_GFEATURES;
    features->size = static_cast<std::uint32_t>(blocks);
    if (!ethtool(fd.fd, device, features)) return -1;
    return (features->features[index / 32].active >> (index % 32)) & 1u ? 1 : 0;
}

GsoChoice choose_gso(const std::string& mode, const SockAddr& server, const std::vector<SockAddr>& sources) {
    if (mode == "off") return {false, "", "off (--gso off)"};
    GsoChoice choice{true, "", ""};
    for (const SockAddr& source : sources) {
        const Egress egress = egress_of(server, source);
        if (choice.device.empty()) choice.device = egress.device;
        if (mode == "on") {
            choice.reason = "forced (--gso on)";
            continue;
        }
        if (egress.device.empty()) return {false, "", "not allowed: the egress device towards the server is unknown"};
        if (egress.loopback) {
            choice.reason = "allowed: " + egress.device + " is the loopback device (the receiving socket cuts each batch)";
            continue;
        }
        const int feature = device_feature(egress.device, "tx-udp-segmentation");
        if (feature != 0) {
            return {false, egress.device,
                    "not allowed: " + egress.device +
                        (feature > 0 ? " has tx-udp-segmentation on, so it would pass uncut batches on (a veth; "
                                       "or a NIC that cuts them in hardware: --gso on)"
                                     : ": its features cannot be read (ethtool)")};
        }
        choice.reason = "allowed: " + egress.device + " has tx-udp-segmentation off (the kernel cuts each batch "
                        "before the driver)";
    }
    return choice;
}

int send_segmented(int fd, const sockaddr* to, socklen_t to_length, iovec* iov, std::size_t count,
                   std::size_t size) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(std::uint16_t))] = {};
    msghdr header{};
    header.msg_name = const_cast<sockaddr*>(to);
    header.msg_namelen = to_length;
    header.msg_iov = iov;
    header.msg_iovlen = count;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    cmsghdr* segment = CMSG_FIRSTHDR(&header);
    segment->cmsg_level = SOL_UDP;
    segment->cmsg_type = UDP_SEGMENT;
    segment->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
    const auto gso_size = static_cast<std::uint16_t>(size);
    std::memcpy(CMSG_DATA(segment), &gso_size, sizeof gso_size);
    return sendmsg(fd, &header, MSG_DONTWAIT) < 0 ? -1 : static_cast<int>(count);
}

bool gso_refused(int error) {
    return error == EIO || error == EINVAL || error == ENOPROTOOPT || error == EOPNOTSUPP || error == EMSGSIZE;
}

}  // namespace xlatperf
