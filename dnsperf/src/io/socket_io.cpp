#include "io/socket_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>

#include "egress.hpp"
#include "gso.hpp"
#include "sources.hpp"
#include "pacing.hpp"
#include "reply.hpp"

namespace xlatperf::io {
namespace {

constexpr std::size_t kReplyBufferSize = 4096;  // larger datagrams are cut and counted malformed
constexpr unsigned kDrainCalls = 64;            // most recvmmsg calls per socket between end-time checks

// CPU time of the calling thread (user + system, ns): unlike the wall clock it
// stops while the thread waits for a CPU.
std::int64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

class SocketSend final : public SendIo {
public:
    SocketSend(const Plan& plan, const QueryTemplate& query, SocketSet& set, bool gso, SenderStats& stats)
        : plan_(plan),
          query_(query),
          set_(set),
          batch_(plan.config.batch),
          query_size_(query.size()),
          buffers_(batch_ * query_size_),
          iovecs_(batch_),
          messages_(batch_),
          indexes_(batch_),
          sequences_on_socket_(batch_),
          sequences_(set.sockets.size(), 0),
          gso_(gso) {
        stats.sent_per_socket.assign(set.sockets.size(), 0);
        for (std::size_t m = 0; m < batch_; ++m) {
            iovecs_[m] = {buffers_.data() + m * query_size_, query_size_};
            msghdr& header = messages_[m].msg_hdr;
            header.msg_name = const_cast<sockaddr*>(plan.server.get());
            header.msg_namelen = plan.server.length;
            header.msg_iov = &iovecs_[m];
            header.msg_iovlen = 1;
        }
    }

    std::uint64_t round_limit() const override { return std::uint64_t{batch_} * set_.sockets.size(); }

    // Queries j .. j+due-1 (due <= batch x sockets), in order, as equal shares of
    // the sockets (one sendmmsg each) starting at the rotating socket; the sockets
    // that get one more rotate, so that over a trial every port carries its share.
    void send(std::uint64_t j, std::uint64_t due, SendContext& context) override {
        const std::size_t sockets = set_.sockets.size();
        const std::uint64_t share = due / sockets;
        const std::uint64_t extra = due % sockets;
        for (std::size_t i = 0; i < sockets && due > 0; ++i) {
            const std::size_t s = (socket_ + i) % sockets;
            const auto count = static_cast<std::size_t>(share + (i < extra ? 1 : 0));
            if (count == 0) continue;
            send_batch(s, j, count, context);
            context.stats().sent_per_socket[s] += count;
            j += count;
        }
        socket_ = (socket_ + extra) % sockets;
    }

private:
    // Fills the ring slots of queries from..count-1 of the batch for `socket`,
    // all stamped `sent_ns` (CLOCK_MONOTONIC).
    void stamp(std::size_t socket, std::size_t from, std::size_t count, std::int64_t sent_ns, SenderStats& stats) {
        OutstandingRing& ring = set_.rings[socket];
        for (std::size_t m = from; m < count; ++m) {
            if (ring.publish(sequences_on_socket_[m], indexes_[m], sent_ns, plan_.timeout_ns)) {
                ++stats.ring_overruns;
            }
        }
    }

    void send_batch(std::size_t socket, std::uint64_t j, std::size_t count, SendContext& context) {
        SenderStats& stats = context.stats();
        const int fd = set_.sockets[socket].fd();
        OutstandingRing& ring = set_.rings[socket];
        for (std::size_t m = 0; m < count; ++m) {
            const std::uint64_t k = context.query_index(j + m);
            const std::uint64_t sequence = sequences_[socket]++;
            indexes_[m] = k;
            sequences_on_socket_[m] = sequence;
            query_.write(buffers_.data() + m * query_size_, static_cast<std::uint16_t>(sequence),
                         plan_.subnet.address(k), sequence >> 16);
        }
        std::size_t done = 0;
        // Send times are CLOCK_MONOTONIC: a step of the wall clock during the trial moves no interval.
        std::int64_t sent_at = monotonic_ns();
        std::int64_t blocked_since = -1;
        stamp(socket, 0, count, sent_at, stats);
        while (done < count) {
            const bool several = count - done > 1 && !gso_;  // a GSO call keeps its start for all
            const std::int64_t cpu_before = several ? thread_cpu_ns() : 0;
            const std::int64_t before = monotonic_ns() - context.start_ns();
            const int result = send_some(fd, done, count, stats);
            const std::int64_t cpu_call = several ? thread_cpu_ns() - cpu_before : 0;
            ++stats.syscalls;
            if (result > 0) {
                const auto n = static_cast<std::size_t>(result);
                // The end of the call bounds when its last query left: time spent inside the call is lag too.
                const std::int64_t after = monotonic_ns() - context.start_ns();
                if (!last_call_gso_ && n > 1) set_left(ring, done, n, before + context.start_ns(), cpu_call);
                context.sent(j + done, n, before, after, sent_at);
                if (blocked_since >= 0) {
                    stats.max_retry_stall_ns = std::max(stats.max_retry_stall_ns, before - blocked_since);
                    blocked_since = -1;
                }
                done += n;
                continue;
            }
            const int error = errno;
            if (error == EINTR) continue;
            if (error == EAGAIN || error == EWOULDBLOCK || error == ENOBUFS) {
                ++stats.would_block;
                if (blocked_since < 0) blocked_since = before;
                if (context.stop_now()) break;
                pollfd wait{fd, POLLOUT, 0};
                poll(&wait, 1, 1);
                // The queries still waiting go out later: give them their real send time.
                sent_at = monotonic_ns();
                for (std::size_t m = done; m < count; ++m) ring.retract(sequences_on_socket_[m]);
                stamp(socket, done, count, sent_at, stats);
                continue;
            }
            // Any other error loses this one query; the rest of the batch is retried.
            ++stats.send_errors;
            ++stats.errno_counts[static_cast<std::size_t>(error) & 0xffu];
            ring.retract(sequences_on_socket_[done]);
            ++stats.unsent;
            ++done;
        }
        for (std::size_t m = done; m < count; ++m) {
            ring.retract(sequences_on_socket_[m]);
            ++stats.unsent;
        }
    }

    // Messages done..done+n-1 left in one sendmmsg call that started at `start_ns`
    // (CLOCK_MONOTONIC) and cost the thread `cpu_ns` of CPU: the kernel takes them
    // one after the other, so message i left about i x cpu_ns / n after the start.
    // CPU time, not the call's wall time: a thread descheduled inside the call or on
    // its way out (a receiver woken on its CPU) would otherwise spread the messages
    // over time they were not sent in and put later ones after they left. A call
    // preempted between two messages leaves the later ones stamped early (latency
    // too high, as with one stamp per call), never late. Message 0 keeps the start.
    void set_left(OutstandingRing& ring, std::size_t done, std::size_t n, std::int64_t start_ns,
                  std::int64_t cpu_ns) {
        const std::int64_t per_message = cpu_ns / static_cast<std::int64_t>(n);
        for (std::size_t i = 1; i < n; ++i) {
            ring.set_left(sequences_on_socket_[done + i], start_ns + static_cast<std::int64_t>(i) * per_message);
        }
    }

    // Messages done..count-1 in one call: a UDP_SEGMENT sendmsg of up to
    // kMaxGsoSegments of them, or sendmmsg. A socket or device that refuses
    // UDP_SEGMENT sends this sender back to sendmmsg for the rest of the trial.
    int send_some(int fd, std::size_t done, std::size_t count, SenderStats& stats) {
        const std::size_t left = count - done;
        if (gso_ && left > 1) {
            const std::size_t chunk = std::min(left, kMaxGsoSegments);
            const int sent = send_segmented(fd, plan_.server.get(), plan_.server.length, iovecs_.data() + done, chunk,
                                            query_size_);
            last_call_gso_ = true;
            if (sent >= 0 || !gso_refused(errno)) {
                stats.gso_calls += sent >= 0 ? 1 : 0;
                return sent;
            }
            stats.gso_refused_errno = errno;
            gso_ = false;
        }
        last_call_gso_ = false;
        return sendmmsg(fd, messages_.data() + done, static_cast<unsigned>(left), MSG_DONTWAIT);
    }

    const Plan& plan_;
    const QueryTemplate& query_;
    SocketSet& set_;
    std::size_t batch_;
    std::size_t query_size_;
    std::vector<std::uint8_t> buffers_;
    std::vector<iovec> iovecs_;
    std::vector<mmsghdr> messages_;
    std::vector<std::uint64_t> indexes_;
    std::vector<std::uint64_t> sequences_on_socket_;
    std::vector<std::uint64_t> sequences_;
    std::size_t socket_ = 0;
    bool gso_;
    bool last_call_gso_ = false;  // the last send call was a UDP_SEGMENT sendmsg (its messages leave together)
};

class SocketReceive final : public ReceiveIo {
public:
    SocketReceive(const Plan& plan, const QueryTemplate& query, SocketSet& set, ReceiverStats& stats)
        : set_(set),
          stats_(stats),
          classifier_(query, plan.subnet, plan.server, plan.timeout_ns),
          batch_(plan.config.batch),
          buffers_(batch_ * kReplyBufferSize),
          iovecs_(batch_),
          sources_(batch_),
          controls_(batch_ * kControlSize),
          messages_(batch_),
          pollfds_(set.sockets.size()) {
        for (std::size_t s = 0; s < set.sockets.size(); ++s) pollfds_[s] = {set.sockets[s].fd(), POLLIN, 0};
        for (std::size_t m = 0; m < batch_; ++m) {
            iovecs_[m] = {buffers_.data() + m * kReplyBufferSize, kReplyBufferSize};
            msghdr& header = messages_[m].msg_hdr;
            header.msg_name = &sources_[m];
            header.msg_iov = &iovecs_[m];
            header.msg_iovlen = 1;
            header.msg_control = controls_.data() + m * kControlSize;
        }
    }

    std::size_t drain(ReplySink& sink) override {
        std::size_t got = 0;
        for (std::size_t s = 0; s < set_.sockets.size(); ++s) got += drain_socket(s, sink);
        return got;
    }

    void wait(std::int64_t timeout_ns) override {
        poll(pollfds_.data(), pollfds_.size(), static_cast<int>(std::max<std::int64_t>(timeout_ns, 0) / 1'000'000 + 1));
    }

    bool pending() override { return poll(pollfds_.data(), pollfds_.size(), 0) > 0; }

private:
    static constexpr std::size_t kControlSize = CMSG_SPACE(sizeof(timespec));

    // Reads the datagrams waiting on `socket`, at most kDrainCalls recvmmsg calls
    // (so that a flood cannot keep the receiver from its end time); returns how many.
    std::size_t drain_socket(std::size_t socket, ReplySink& sink) {
        const int fd = set_.sockets[socket].fd();
        std::size_t total = 0;
        for (unsigned call = 0; call < kDrainCalls; ++call) {
            for (std::size_t m = 0; m < batch_; ++m) {
                messages_[m].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
                messages_[m].msg_hdr.msg_controllen = kControlSize;
                messages_[m].msg_hdr.msg_flags = 0;
            }
            const int result = recvmmsg(fd, messages_.data(), static_cast<unsigned>(batch_), MSG_DONTWAIT, nullptr);
            ++stats_.syscalls;
            if (result <= 0) return total;
            const auto n = static_cast<std::size_t>(result);
            total += n;
            // The kernel stamps replies on CLOCK_REALTIME: they are moved to CLOCK_MONOTONIC by the
            // two clocks' offset read now, so only a wall-clock step between a reply's arrival and
            // this read (not one anywhere in the trial) can shift its latency.
            const std::int64_t real_minus_monotonic = realtime_minus_monotonic_ns();
            const std::int64_t now = monotonic_ns();
            for (std::size_t m = 0; m < n; ++m) handle(socket, m, now, real_minus_monotonic, sink);
            if (n < batch_) return total;
        }
        return total;
    }

    // The kernel's receive time of a datagram on CLOCK_MONOTONIC; `fallback_ns` when it has none.
    static std::int64_t kernel_timestamp(msghdr& header, std::int64_t fallback_ns, std::int64_t real_minus_monotonic) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                timespec ts{};
                std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec - real_minus_monotonic;
            }
        }
        return fallback_ns;
    }

    void handle(std::size_t socket, std::size_t m, std::int64_t fallback_ns, std::int64_t real_minus_monotonic,
                ReplySink& sink) {
        mmsghdr& message = messages_[m];
        const std::int64_t received_ns = kernel_timestamp(message.msg_hdr, fallback_ns, real_minus_monotonic);
        const bool cut = (message.msg_hdr.msg_flags & MSG_TRUNC) != 0;
        const Outcome outcome = classifier_.classify(
            set_.rings[socket], buffers_.data() + m * kReplyBufferSize,
            std::min<std::size_t>(message.msg_len, kReplyBufferSize), cut,
            reinterpret_cast<const sockaddr*>(&sources_[m]), message.msg_hdr.msg_namelen, received_ns);
        sink.reply(outcome, received_ns, socket);
    }

    SocketSet& set_;
    ReceiverStats& stats_;
    ReplyClassifier classifier_;
    std::size_t batch_;
    std::vector<std::uint8_t> buffers_;
    std::vector<iovec> iovecs_;
    std::vector<sockaddr_storage> sources_;
    std::vector<std::uint8_t> controls_;
    std::vector<mmsghdr> messages_;
    std::vector<pollfd> pollfds_;
};

// The socket backend: each pair's K UDP sockets with their rings, bound before the first query.
class SocketBackend final : public Backend {
public:
    SocketBackend(const Plan& plan, const QueryTemplate& query) : plan_(plan), query_(query) {
        const Config& config = plan.config;
        std::vector<SockAddr> sources;
        for (const Source& source : plan.sources) sources.push_back(source.address);
        gso_ = choose_gso(config.gso, plan.server, sources);
        egress_ = xlatperf::egress_devices(plan.server, sources);
        // Sockets beyond the open-file limit fail at open: raise it first, or say plainly that it is too low.
        const std::uint64_t socket_count = std::uint64_t{config.threads} * config.ports_per_thread;
        if (!make_room_for_sockets(socket_count)) {
            rlimit limit{};
            getrlimit(RLIMIT_NOFILE, &limit);
            throw StartError("too many open files: the tester needs " + std::to_string(socket_count) +
                             " sockets (--threads x --ports-per-thread) plus a few more descriptors, but the "
                             "open-file limit is " + std::to_string(limit.rlim_max) + " (ulimit -n); raise it or use fewer");
        }
        sets_.resize(config.threads);
        for (unsigned i = 0; i < config.threads; ++i) {
            SocketSet& set = sets_[i];
            set.sockets.reserve(config.ports_per_thread);
            set.rings.reserve(config.ports_per_thread);
            for (unsigned s = 0; s < config.ports_per_thread; ++s) {
                const SocketSource from = socket_source(plan, i, s);
                set.sockets.emplace_back(io_, plan.sources[from.source].address, from.port, config.rcvbuf,
                                         config.sndbuf);
                set.rings.emplace_back(plan.ring_slots);
                set.ports.push_back(set.sockets.back().local_port());
                set.addresses.push_back(plan.sources[from.source].text);
            }
        }
    }

    std::uint64_t channels(unsigned pair) const override { return sets_.at(pair).sockets.size(); }
    Flow channel(unsigned pair, std::uint64_t socket) const override {
        const SocketSet& set = sets_.at(pair);
        return Flow{set.addresses.at(socket), set.ports.at(socket)};
    }
    bool channels_shared() const override { return false; }
    std::unique_ptr<SendIo> sender(unsigned pair, SenderStats& stats) override {
        return std::make_unique<SocketSend>(plan_, query_, sets_.at(pair), gso_.use, stats);
    }
    std::unique_ptr<ReceiveIo> receiver(unsigned pair, ReceiverStats& stats) override {
        return std::make_unique<SocketReceive>(plan_, query_, sets_.at(pair), stats);
    }
    void describe(unsigned pair, PairResult& result) const override {
        result.ports = sets_.at(pair).ports;
        result.source_addresses = sets_.at(pair).addresses;
    }
    std::vector<int> egress_devices() const override { return egress_; }

    // SO_MEMINFO drops count a full receive buffer and a bad checksum alike: the namespace's checksum
    // errors over the trial are the DUT's, the rest are the tester's own drops.
    IoReport finish(const UdpErrorCounters& namespace_udp) override {
        IoReport report;
        report.mode = "socket";
        report.gso = gso_;
        std::uint64_t drops = 0;
        for (SocketSet& set : sets_) {
            for (UdpSocket& socket : set.sockets) drops += socket.drops();
        }
        report.counters.checksum_errors = namespace_udp.checksum_errors;
        report.counters.tester_drops = drops - std::min(drops, namespace_udp.checksum_errors);
        const UdpSocket& first = sets_.front().sockets.front();
        report.sockets = SocketReport{std::uint64_t{plan_.config.threads} * plan_.config.ports_per_thread,
                                      first.rcvbuf_granted(), first.sndbuf_granted(), first.buffers_forced()};
        return report;
    }

private:
    const Plan& plan_;
    const QueryTemplate& query_;
    boost::asio::io_context io_;
    std::vector<SocketSet> sets_;       // pair i's is sets_[i]
    GsoChoice gso_;
    std::vector<int> egress_;
};

}  // namespace

std::unique_ptr<Backend> open_socket_backend(const Plan& plan, const QueryTemplate& query) {
    return std::make_unique<SocketBackend>(plan, query);
}

}  // namespace xlatperf::io
