#include <catch2/catch.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "options.hpp"

using namespace xlatperf;

namespace {

Config base() {
    Config c;
    c.server = "127.0.0.1";
    return c;
}

struct Parsed {
    CommandLine command;
    std::string out;
    std::string err;
};

Parsed parse(std::vector<std::string> args) {
    args.insert(args.begin(), "xlatperf");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    Parsed p{parse_command_line(static_cast<int>(argv.size()), argv.data(), out, err), "", ""};
    p.out = out.str();
    p.err = err.str();
    return p;
}

}  // namespace

TEST_CASE("a plain run derives its plan from the defaults") {
    const Plan plan = make_plan(base());
    CHECK(plan.total_queries == 10'000);  // 1000 queries/s x 10 s
    CHECK(plan.scheduled_window_s == Approx(10));
    CHECK(plan.server_text == "127.0.0.1");
    CHECK(plan.bind_text == "0.0.0.0");
    CHECK(plan.subnet.prefix_length == 16);
    CHECK(plan.qtype == 28);
    CHECK(plan.timeout_ns == 250'000'000);
    CHECK(plan.effective_send_tolerance_s == Approx(0.002));
    CHECK(plan.send_bound_s == Approx(10 + 0.002 + 0.02));  // window + tolerance + --max-lag
    CHECK(plan.sender_cpus.empty());
    // Ring: a power of two holding twice the queries outstanding per socket, plus batches.
    CHECK((plan.ring_slots & (plan.ring_slots - 1)) == 0);
    CHECK(plan.ring_slots >= 2 * 63 + 2 * 64);  // 1000 queries/s over 4 sockets x 0.25 s
}

TEST_CASE("the plan follows rate, queries, tolerance and ring sizing") {
    Config c = base();
    c.rate_qps = 200'000;
    c.threads = 2;
    c.ports_per_thread = 4;
    c.duration_s = 1000;
    Plan plan = make_plan(c);
    CHECK(plan.total_queries == 200'000'000);
    CHECK(plan.per_socket_rate_qps == Approx(25'000));
    CHECK(plan.ring_slots == 16384);  // 2 x 6250 + 128 -> 16384
    CHECK(plan.effective_send_tolerance_s == Approx(0.01));  // 1e-5 x 1000 s beats 2 ms
    CHECK(plan.send_bound_s == Approx(1000 + 0.01 + 0.02));
    c.max_lag_s = 0;  // no lag check: still bounded, one window more
    CHECK(make_plan(c).send_bound_s == Approx(1000 + 0.01 + 1000));
    c.max_lag_s = 0.02;

    c.queries = 12345;
    plan = make_plan(c);
    CHECK(plan.total_queries == 12345);
    CHECK(plan.scheduled_window_s == Approx(12345.0 / 200'000));

    c = base();
    c.server = "::1";
    c.bind = "::1";
    c.sender_cpus = "0";
    plan = make_plan(c);
    CHECK(plan.server.family() == AF_INET6);
    CHECK(plan.bind_text == "::1");
    CHECK(plan.sender_cpus == std::vector<int>{0});
}

TEST_CASE("bad combinations are refused with one line naming the problem") {
    struct Case {
        const char* expect;
        std::function<void(Config&)> change;
    };
    const std::vector<Case> cases = {
        {"--server is required", [](Config& c) { c.server.clear(); }},
        {"not an IPv4 or IPv6", [](Config& c) { c.server = "localhost"; }},
        {"not an IPv4 or IPv6", [](Config& c) { c.server = "1.2.3.4.5"; }},
        {"different IP versions", [](Config& c) { c.bind = "::1"; }},
        {"--bind", [](Config& c) { c.bind = "nowhere"; }},
        {"--port", [](Config& c) { c.port = 0; }},
        {"--rate must be", [](Config& c) { c.rate_qps = 0; }},
        {"--rate must be", [](Config& c) { c.rate_qps = -5; }},
        {"below --threads", [](Config& c) { c.rate_qps = 10; c.threads = 16; }},
        {"--threads", [](Config& c) { c.threads = 0; }},
        {"--ports-per-thread", [](Config& c) { c.ports_per_thread = 0; }},
        {"--duration", [](Config& c) { c.duration_s = 0; }},
        {"less than one query", [](Config& c) { c.rate_qps = 1; c.duration_s = 0.1; }},
        {"past port 65535", [](Config& c) { c.first_port = 65000; c.threads = 16; c.ports_per_thread = 100; }},
        {"ephemeral port range", [](Config& c) { c.threads = 1000; c.ports_per_thread = 1000; c.rate_qps = 2000; }},
        {"--timeout", [](Config& c) { c.timeout_s = 0; }},
        {"--timeout", [](Config& c) { c.timeout_s = 61; }},
        {"outstanding per socket", [](Config& c) { c.rate_qps = 1e6; }},
        {"outstanding per socket", [](Config& c) { c.rate_qps = 200'000; c.ports_per_thread = 1; c.timeout_s = 1; }},
        {"bad subnet", [](Config& c) { c.subnet = "10.0.0.1/8"; }},
        {"bad query type", [](Config& c) { c.qtype = "NOPE"; }},
        {"bad domain", [](Config& c) { c.domain = "a..b"; }},
        {"--sender-cpus", [](Config& c) { c.sender_cpus = "1-0"; }},
        {"not available", [](Config& c) { c.receiver_cpus = "1000"; }},
        {"--batch", [](Config& c) { c.batch = 0; }},
        {"--batch", [](Config& c) { c.batch = 5000; }},
        {"--send-tick", [](Config& c) { c.send_tick_s = 1; }},
        {"--recv-tick", [](Config& c) { c.recv_tick_s = -1; }},
        {"--send-tolerance", [](Config& c) { c.send_tolerance = -1; }},
        {"--max-lag", [](Config& c) { c.max_lag_s = -1; }},
        {"--rcvbuf", [](Config& c) { c.rcvbuf = std::uint64_t{1} << 31; }},
        {"--run-id", [](Config& c) { c.run_id = "has space"; }},
    };
    for (const auto& test : cases) {
        Config c = base();
        test.change(c);
        INFO("expecting: " << test.expect);
        try {
            make_plan(c);
            FAIL("accepted");
        } catch (const OptionError& e) {
            const std::string message = e.what();
            CHECK_THAT(message, Catch::Contains(test.expect));
            CHECK(message.find('\n') == std::string::npos);
        }
    }
}

TEST_CASE("the command line: help and version exit 0, errors one line and exit 2") {
    const Parsed help = parse({"--help"});
    CHECK_FALSE(help.command.plan);
    CHECK(help.command.exit_code == 0);
    for (const char* option : {"--server", "--port", "--rate", "--duration", "--queries", "--threads",
                               "--ports-per-thread", "--first-port", "--bind", "--timeout", "--domain", "--qtype",
                               "--subnet", "--sender-cpus", "--receiver-cpus", "--rcvbuf", "--sndbuf", "--json",
                               "--quiet", "--batch", "--send-tick", "--recv-tick", "--send-tolerance",
                               "--max-lag", "--version"}) {
        CHECK_THAT(help.out, Catch::Contains(option));
    }
    // Defaults come from the same Config the parser fills.
    CHECK_THAT(help.out, Catch::Contains("=53") && Catch::Contains("=0.25") && Catch::Contains("=dns64perf.test") &&
                             Catch::Contains("=AAAA") && Catch::Contains("=10.0.0.0/16") && Catch::Contains("=1000"));

    const Parsed version = parse({"--version"});
    CHECK(version.command.exit_code == 0);
    CHECK_THAT(version.out, Catch::StartsWith("xlatperf "));

    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {},
             {"--server", "127.0.0.1", "--bogus"},
             {"--server", "127.0.0.1", "--rate", "fast"},
             {"--server", "127.0.0.1", "--port", "70000"},
             {"--server", "127.0.0.1", "--duration", "5", "--queries", "10"},
             {"--server", "127.0.0.1", "--rate", "1", "--threads", "2"},
             {"--server", "300.1.1.1"}}) {
        const Parsed p = parse(bad);
        INFO("stderr: " << p.err);
        CHECK_FALSE(p.command.plan);
        CHECK(p.command.exit_code == kExitBadOptions);
        CHECK(p.out.empty());
        REQUIRE_FALSE(p.err.empty());
        CHECK(p.err.find('\n') == p.err.size() - 1);  // exactly one line
        CHECK_THAT(p.err, Catch::StartsWith("xlatperf: "));
    }
}

TEST_CASE("the command line fills the plan and keeps argv") {
    const Parsed p = parse({"-s", "::1", "-p", "5353", "-r", "5000", "-n", "777", "-T", "2", "-K", "3",
                            "--first-port", "40000", "--subnet", "192.0.2.0/24", "--qtype", "A", "-q"});
    REQUIRE(p.command.plan);
    const Plan& plan = *p.command.plan;
    CHECK(plan.config.port == 5353);
    CHECK(plan.total_queries == 777);
    CHECK(plan.config.threads == 2);
    CHECK(plan.config.ports_per_thread == 3);
    CHECK(plan.config.first_port == 40000);
    CHECK(plan.qtype == 1);
    CHECK(plan.config.quiet);
    CHECK(plan.argv.size() == 20);
    CHECK(plan.argv[0] == "xlatperf");
}

TEST_CASE("huge or inconsistent loads are refused at parse time, not by the allocator") {
    Config c;
    c.server = "127.0.0.1";
    c.duration_s = 1e12;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--duration must be more than 0 and at most 86400 s"));
    c.duration_s = 10;
    c.queries = 100'000'000'000'000ull;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--queries 100000000000000 is more than"));
    c.queries = 1'000'000;
    c.rate_qps = 1;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("more than one day"));
    c = Config{};
    c.server = "127.0.0.1";
    c.send_tick_s = 0.005;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--send-tick 0.005 s is larger than the send tolerance"));
    c.send_tick_s = 0.001;
    c.max_lag_s = 0.0005;
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--max-lag 0.0005 s is smaller than --send-tick"));
    c.max_lag_s = 0;  // off
    CHECK_NOTHROW(make_plan(c));
}

TEST_CASE("a trial that would preallocate more than 1 GiB is refused with the arithmetic") {
    Config c;
    c.server = "127.0.0.1";
    c.threads = 1024;
    c.ports_per_thread = 1;
    c.rate_qps = 1'000'000;
    c.duration_s = 86400;  // one day: 1024 pairs x ~86 400 per-second rows
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("would preallocate") &&
                                        Catch::Contains("per-second series 1024 threads x 86405 s x 48 B"));
    c.duration_s = 60;
    const Plan plan = make_plan(c);
    CHECK(plan.series_rows == 64);  // ceil(60.022 + 1 + 0.25) + 2
    CHECK(plan.prealloc_bytes < kMaxPreallocBytes);
}

TEST_CASE("a domain without letters is refused only when a socket's IDs wrap") {
    Config c;
    c.server = "127.0.0.1";
    c.domain = "64.36";
    c.ports_per_thread = 1;
    c.rate_qps = 10'000;
    c.duration_s = 6.5;  // 65 000 queries on one socket: no wrap
    CHECK_NOTHROW(make_plan(c));
    c.duration_s = 7;    // 70 000
    CHECK_THROWS_WITH(make_plan(c), Catch::Contains("--domain 64.36 has no letters") &&
                                        Catch::Contains("each socket sends up to 70000 queries"));
    c.ports_per_thread = 2;  // 35 000 each
    CHECK_NOTHROW(make_plan(c));
}
