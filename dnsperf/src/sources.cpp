#include "sources.hpp"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cstring>
#include <sstream>
#include <unordered_set>

#include "net.hpp"
#include "options.hpp"

namespace xlatperf {
namespace {

const char* const kExample = "example: --source 192.0.2.8,55296-57343";

[[noreturn]] void bad_source(const std::string& text, const std::string& why) {
    throw OptionError("bad --source '" + text + "': " + why + " (" + kExample + ")");
}

std::uint16_t parse_port(const std::string& source, const std::string& text) {
    const bool digits = !text.empty() && text.size() <= 5 &&
                        text.find_first_not_of("0123456789") == std::string::npos;
    const unsigned long value = digits ? std::stoul(text) : 0;
    if (value < 1 || value > 65535) bad_source(source, "port '" + text + "' must be a number 1..65535");
    return static_cast<std::uint16_t>(value);
}

PortRange parse_range(const std::string& source, const std::string& text) {
    const auto dash = text.find('-');
    PortRange range;
    range.first = parse_port(source, text.substr(0, dash));
    range.last = dash == std::string::npos ? range.first : parse_port(source, text.substr(dash + 1));
    if (range.last < range.first) {
        bad_source(source, "port range '" + text + "' must be FIRST-LAST with FIRST <= LAST");
    }
    return range;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::istringstream in(text);
    std::string part;
    while (std::getline(in, part, separator)) parts.push_back(part);
    if (!text.empty() && text.back() == separator) parts.emplace_back();
    return parts;
}

// --source given with --bind / --first-port, or none at all: the one source those make.
Source legacy_source(const Config& c, const Plan& plan) {
    Source source;
    source.address = plan.bind;
    source.text = plan.bind_text;
    if (c.first_port != 0) {
        const std::uint64_t sockets = std::uint64_t{c.threads} * c.ports_per_thread;
        const std::uint64_t last = std::min<std::uint64_t>(65535, c.first_port + sockets - 1);
        source.ranges.push_back(PortRange{c.first_port, static_cast<std::uint16_t>(last)});
    }
    return source;
}

// `seen` holds the addresses before it: a set, so tens of thousands of sources cost no more than their count.
void check_source(const Config& c, const Plan& plan, const Source& s, const std::string& given,
                  std::unordered_set<std::string>& seen) {
    if (s.address.family() != plan.server.family()) {
        throw OptionError("--source " + given + " and --server " + c.server +
                          " are of different IP versions; give sources of the server's family");
    }
    if (!seen.insert(s.text).second) {
        throw OptionError("--source " + s.text + " is given twice; list each address once, with all its "
                          "port ranges after it (" + std::string(kExample) + ",60000-60999)");
    }
}

}  // namespace

Source parse_source(const std::string& text) {
    const std::vector<std::string> parts = split(text, ',');
    if (parts.empty() || parts.front().empty()) bad_source(text, "no address before the ports");
    boost::system::error_code error;
    const auto address = boost::asio::ip::make_address(parts.front(), error);
    if (error) bad_source(text, "'" + parts.front() + "' is not an IPv4 or IPv6 address literal");
    Source source;
    source.address = to_sockaddr(boost::asio::ip::udp::endpoint(address, 0));
    source.text = address.to_string();
    for (std::size_t i = 1; i < parts.size(); ++i) {
        const PortRange range = parse_range(text, parts[i]);
        if (!source.ranges.empty() && range.first <= source.ranges.back().last) {
            bad_source(text, "port range '" + parts[i] + "' overlaps or precedes the one before it; "
                             "list ranges in increasing order without overlap");
        }
        source.ranges.push_back(range);
    }
    return source;
}

namespace {

// The address after `bytes` (4 or 16 bytes, network order); false when it wraps.
bool next_address(std::uint8_t* bytes, std::size_t length) {
    for (std::size_t i = length; i-- > 0;) {
        if (++bytes[i] != 0) return true;
    }
    return false;
}

std::uint8_t* address_bytes_of(Source& source) {
    if (source.address.family() == AF_INET) {
        return reinterpret_cast<std::uint8_t*>(&reinterpret_cast<sockaddr_in*>(&source.address.storage)->sin_addr);
    }
    return reinterpret_cast<std::uint8_t*>(&reinterpret_cast<sockaddr_in6*>(&source.address.storage)->sin6_addr);
}

}  // namespace

std::vector<Source> parse_sources(const std::string& text) {
    const auto comma = text.find(',');
    const std::string addresses = text.substr(0, comma);
    const std::string ports = comma == std::string::npos ? std::string() : text.substr(comma);
    const auto dash = addresses.find('-');
    if (dash == std::string::npos) return {parse_source(text)};
    Source first = parse_source(addresses.substr(0, dash) + ports);
    Source last = parse_source(addresses.substr(dash + 1));
    if (first.address.family() != last.address.family()) {
        bad_source(text, "the address range '" + addresses + "' mixes IPv4 and IPv6");
    }
    const std::size_t length = first.address.family() == AF_INET ? 4 : 16;
    const std::uint8_t* end = address_bytes_of(last);
    if (std::memcmp(address_bytes_of(first), end, length) > 0) {
        bad_source(text, "the address range '" + addresses + "' must be FIRST-LAST with FIRST <= LAST");
    }
    std::vector<Source> out{first};
    while (std::memcmp(address_bytes_of(out.back()), end, length) != 0) {
        if (out.size() >= kMaxSourceAddresses) {
            bad_source(text, "the address range '" + addresses + "' holds more than " +
                                 std::to_string(kMaxSourceAddresses) + " addresses; give a shorter one");
        }
        Source next = out.back();
        next_address(address_bytes_of(next), length);
        next.text = to_endpoint(next.address).address().to_string();
        out.push_back(std::move(next));
    }
    return out;
}

std::vector<PortRange> used_ports(const Source& source) {
    std::vector<PortRange> kept;
    std::uint64_t left = source.sockets;
    for (const PortRange& range : source.ranges) {
        if (left == 0) break;
        const std::uint64_t take = std::min(left, range.size());
        kept.push_back(PortRange{range.first, static_cast<std::uint16_t>(range.first + take - 1)});
        left -= take;
    }
    return kept;
}

std::uint64_t sockets_of_source(std::uint64_t sockets, std::size_t count, std::size_t index) {
    return sockets / count + (index < sockets % count ? 1 : 0);
}

void plan_sources(const Config& c, Plan& plan) {
    plan.sources.clear();
    plan.sources_given = !c.sources.empty();
    const std::uint64_t sockets = std::uint64_t{c.threads} * c.ports_per_thread;
    if (!plan.sources_given) {
        plan.sources.push_back(legacy_source(c, plan));
        plan.sources.back().sockets = sockets;
        return;
    }
    if (!c.bind.empty() || c.first_port != 0) {
        throw OptionError("--source replaces --bind and --first-port: give the address and ports as "
                          "--source ADDR,FIRST-LAST instead of combining them");
    }
    plan.bind_text.clear();  // no --bind: the sources say where the sockets are bound
    std::unordered_set<std::string> seen;
    for (const std::string& text : c.sources) {
        for (Source& source : parse_sources(text)) {
            check_source(c, plan, source, text, seen);
            plan.sources.push_back(std::move(source));
        }
    }
    const std::size_t count = plan.sources.size();
    if (sockets < count) {
        throw OptionError(std::to_string(count) + " --source addresses but only --threads x --ports-per-thread = " +
                          std::to_string(sockets) + " sockets: every source needs one; raise the sockets to " +
                          std::to_string(count) + " or give fewer sources");
    }
    for (std::size_t i = 0; i < count; ++i) {
        Source& source = plan.sources[i];
        source.sockets = sockets_of_source(sockets, count, i);
        if (!source.ranges.empty() && source.sockets > source.port_count()) {
            throw OptionError("--threads x --ports-per-thread = " + std::to_string(sockets) + " sockets over " +
                              std::to_string(count) + " --source addresses put " + std::to_string(source.sockets) +
                              " on --source " + source_text(source) + ", which has only " +
                              std::to_string(source.port_count()) +
                              " ports; use fewer sockets or give that source more ports");
        }
    }
}

SocketSource socket_source(const Plan& plan, unsigned thread, unsigned socket) {
    const std::uint64_t global = std::uint64_t{thread} * plan.config.ports_per_thread + socket;
    SocketSource out;
    out.source = static_cast<std::size_t>(global % plan.sources.size());
    std::uint64_t nth = global / plan.sources.size();
    for (const PortRange& range : plan.sources[out.source].ranges) {
        if (nth < range.size()) {
            out.port = static_cast<std::uint16_t>(range.first + nth);
            return out;
        }
        nth -= range.size();
    }
    return out;  // ephemeral (or, for a checked plan, never reached)
}

std::string source_text(const Source& source) {
    std::string text = source.text;
    for (const PortRange& r : source.ranges) {
        text += "," + std::to_string(r.first);
        if (r.last != r.first) text += "-" + std::to_string(r.last);
    }
    return text;
}

}  // namespace xlatperf
