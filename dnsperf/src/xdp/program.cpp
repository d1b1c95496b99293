#include "xdp/program.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <limits>
#include <linux/if_link.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include "xdp/filter_abi.h"
#include "xdp/filter_keys.hpp"

// The BPF object, embedded at build time (cmake/embed.cmake).
extern const unsigned char xlb_reply_filter_object[];
extern const std::size_t xlb_reply_filter_object_size;

namespace xlatperf::xdp {
namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

int interface_index(const std::string& ifname) {
    const unsigned index = if_nametoindex(ifname.c_str());
    if (index == 0) throw XdpError("no network interface '" + ifname + "' here (ip link shows the names)");
    return static_cast<int>(index);
}

// An fd closed on scope exit.
struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

// The owner pid recorded in the config map of program `prog_fd`; 0 when it has none.
std::uint32_t owner_of(int prog_fd) {
    bpf_prog_info info{};
    std::uint32_t length = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &length) != 0) return 0;
    std::vector<std::uint32_t> ids(info.nr_map_ids);
    if (ids.empty()) return 0;
    const std::uint32_t nr = info.nr_map_ids;
    info = bpf_prog_info{};
    info.nr_map_ids = nr;
    info.map_ids = reinterpret_cast<std::uint64_t>(ids.data());
    length = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &length) != 0) return 0;
    for (std::uint32_t id : ids) {
        Fd map(bpf_map_get_fd_by_id(id));
        if (map.fd < 0) continue;
        bpf_map_info map_info{};
        std::uint32_t map_length = sizeof map_info;
        if (bpf_obj_get_info_by_fd(map.fd, &map_info, &map_length) != 0) continue;
        if (std::strcmp(map_info.name, "xlb_config") != 0) continue;
        xlb_config config{};
        const std::uint32_t key = 0;
        if (bpf_map_lookup_elem(map.fd, &key, &config) == 0) return config.owner_pid;
    }
    return 0;
}

bool process_alive(std::uint32_t pid) {
    if (pid == 0) return false;
    return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

void copy_address(const SockAddr& address, std::uint8_t* out) {
    if (address.family() == AF_INET) {
        std::memcpy(out, &reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_addr, 4);
    } else {
        std::memcpy(out, &reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_addr, 16);
    }
}

std::uint16_t port_of(const SockAddr& address) {
    return address.family() == AF_INET ? reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_port
                                       : reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_port;
}

}  // namespace

bool remove_stale(const std::string& ifname) {
    const int ifindex = interface_index(ifname);
    bpf_xdp_query_opts query{};
    query.sz = sizeof query;
    if (bpf_xdp_query(ifindex, 0, &query) != 0) return false;
    bool removed = false;
    const std::pair<std::uint32_t, std::uint32_t> attached[] = {{query.drv_prog_id, XDP_FLAGS_DRV_MODE},
                                                                 {query.skb_prog_id, XDP_FLAGS_SKB_MODE},
                                                                 {query.hw_prog_id, XDP_FLAGS_HW_MODE}};
    for (const auto& [id, flag] : attached) {
        if (id == 0) continue;
        Fd prog(bpf_prog_get_fd_by_id(id));
        if (prog.fd < 0) continue;
        bpf_prog_info info{};
        std::uint32_t length = sizeof info;
        if (bpf_obj_get_info_by_fd(prog.fd, &info, &length) != 0) continue;
        if (std::strcmp(info.name, XLB_PROG_NAME) != 0) {
            throw XdpError("interface " + ifname + " already has XDP program '" + info.name + "' (id " +
                           std::to_string(id) + ") of someone else; remove it (ip link set dev " + ifname +
                           " xdp off) or use another interface");
        }
        const std::uint32_t owner = owner_of(prog.fd);
        if (owner != static_cast<std::uint32_t>(getpid()) && process_alive(owner)) {
            throw XdpError("interface " + ifname + " is in use by the AF_XDP tester of process " +
                           std::to_string(owner) + " (XDP program id " + std::to_string(id) + ")");
        }
        bpf_xdp_attach_opts opts{};
        opts.sz = sizeof opts;
        opts.old_prog_fd = prog.fd;
        const int err = bpf_xdp_detach(ifindex, flag | XDP_FLAGS_REPLACE, &opts);
        if (err != 0 && err != -EEXIST) {
            throw XdpError("cannot remove the stale XDP program (id " + std::to_string(id) + ") from " + ifname +
                           ": " + errno_text(err));
        }
        removed = true;
    }
    return removed;
}

void XdpProgram::ObjectDeleter::operator()(bpf_object* o) const { bpf_object__close(o); }

XdpProgram::XdpProgram(const std::string& ifname, const FilterSpec& spec, AttachMode mode) {
    ifindex_ = interface_index(ifname);
    const std::vector<xlb_key> keys =
        spec.encap ? xdp::ipv4_range_keys(spec.first_ipv4, spec.last_ipv4) : xdp::filter_keys(spec.sources);
    if (keys.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw XdpError("the XDP filter would need " + std::to_string(keys.size()) +
                       " (address, port prefix) keys, more than a BPF map holds; use fewer sources or wider ranges");
    }
    filter_keys_ = keys.size();
    stale_removed_ = remove_stale(ifname);

    bpf_object_open_opts open_opts{};
    open_opts.sz = sizeof open_opts;
    open_opts.object_name = "xlb_reply_filter";
    bpf_object* raw = bpf_object__open_mem(xlb_reply_filter_object, xlb_reply_filter_object_size, &open_opts);
    if (raw == nullptr) throw XdpError("cannot open the embedded BPF object: " + errno_text(errno));
    object_.reset(raw);
    bpf_map* prefixes = bpf_object__find_map_by_name(raw, "xlb_prefixes");
    if (prefixes == nullptr) throw XdpError("the embedded BPF object lacks its prefix map (build error)");
    if (const int err = bpf_map__set_max_entries(prefixes, static_cast<std::uint32_t>(std::max<std::size_t>(1, keys.size())));
        err != 0) {
        throw XdpError("cannot size the XDP prefix map: " + errno_text(err));
    }
    if (const int err = bpf_object__load(raw); err != 0) {
        throw XdpError("the kernel refused the XDP program: " + errno_text(err) +
                       " (needs root or CAP_BPF + CAP_NET_ADMIN, and a kernel with BPF and XDP sockets)");
    }
    bpf_program* prog = bpf_object__find_program_by_name(raw, XLB_PROG_NAME);
    bpf_map* config_map = bpf_object__find_map_by_name(raw, "xlb_config");
    bpf_map* xsks = bpf_object__find_map_by_name(raw, "xlb_xsks");
    bpf_map* stats = bpf_object__find_map_by_name(raw, "xlb_stats");
    if (!prog || !config_map || !xsks || !stats) {
        throw XdpError("the embedded BPF object lacks its program or maps (build error)");
    }
    prog_fd_ = bpf_program__fd(prog);
    xsks_fd_ = bpf_map__fd(xsks);
    stats_fd_ = bpf_map__fd(stats);

    xlb_config config{};
    config.family = spec.server.family() == AF_INET ? 4 : 6;
    copy_address(spec.server, config.server);
    config.server_port = port_of(spec.server);
    config.vlan = spec.vlan;
    config.owner_pid = static_cast<std::uint32_t>(getpid());
    config.encap = spec.encap ? 1 : 0;
    std::memcpy(config.outer_server, spec.outer_server.data(), 16);
    // A full trie or memory for it is the kernel's limit: say which, and after how many keys.
    const std::uint8_t present = 1;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (bpf_map_update_elem(bpf_map__fd(prefixes), &keys[i], &present, BPF_NOEXIST) != 0) {
            const int err = errno;
            throw XdpError("the kernel took only " + std::to_string(i) + " of the XDP filter's " +
                           std::to_string(keys.size()) + " (address, port prefix) keys: " + errno_text(err) +
                           " (BPF map memory; use fewer sources or port ranges that align to powers of two)");
        }
    }
    config.prefix_count = static_cast<std::uint32_t>(keys.size());
    const std::uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(config_map), &zero, &config, BPF_ANY) != 0) {
        throw XdpError("cannot fill the XDP config map: " + errno_text(errno));
    }

    int err = -EOPNOTSUPP;
    if (mode != AttachMode::generic) {
        err = bpf_xdp_attach(ifindex_, prog_fd_, XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr);
        native_ = err == 0;
    }
    if (err != 0 && mode != AttachMode::native) {
        err = bpf_xdp_attach(ifindex_, prog_fd_, XDP_FLAGS_SKB_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr);
    }
    if (err != 0) {
        throw XdpError("cannot attach the XDP program to " + ifname + " in " +
                       (mode == AttachMode::native ? "native" : mode == AttachMode::generic ? "generic" : "any") +
                       " mode: " + errno_text(err));
    }
    bpf_prog_info info{};
    std::uint32_t length = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd_, &info, &length) == 0) prog_id_ = info.id;
}

XdpProgram::~XdpProgram() {
    bpf_xdp_attach_opts opts{};
    opts.sz = sizeof opts;
    opts.old_prog_fd = prog_fd_;
    // Only our own program: REPLACE with an expected old fd fails if another one is there.
    bpf_xdp_detach(ifindex_, (native_ ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE) | XDP_FLAGS_REPLACE, &opts);
}

void XdpProgram::bind_queue(std::uint32_t queue, int xsk_fd) {
    if (queue >= XLB_MAX_QUEUES) throw XdpError("queue " + std::to_string(queue) + " beyond the XSK map");
    if (bpf_map_update_elem(xsks_fd_, &queue, &xsk_fd, BPF_ANY) != 0) {
        throw XdpError("cannot put the AF_XDP socket into the XSK map: " + errno_text(errno));
    }
}

FilterStats XdpProgram::stats() const {
    FilterStats out;
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return out;
    std::vector<std::uint64_t> values(static_cast<std::size_t>(cpus));
    for (std::uint32_t key = 0; key < XLB_STAT_COUNT; ++key) {
        if (bpf_map_lookup_elem(stats_fd_, &key, values.data()) != 0) continue;
        std::uint64_t sum = 0;
        for (std::uint64_t v : values) sum += v;
        if (key == XLB_STAT_REDIRECTED) out.redirected = sum;
        if (key == XLB_STAT_PASSED) out.passed = sum;
        if (key == XLB_STAT_UNBOUND) out.unbound = sum;
    }
    return out;
}

}  // namespace xlatperf::xdp
