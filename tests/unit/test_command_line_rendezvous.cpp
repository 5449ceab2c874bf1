// The launch command line as npu_run parses it: node counts and ranks, the rendezvous' address,
// port, endpoint and conf, the workers' store, torchrun's rendezvous habits.
#include <catch2/catch.hpp>

#include "cli/parse_launch.hpp"
#include "support/cli_parse.hpp"

namespace test_command_line_rendezvous {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::Cli;

TEST_CASE("cli: node counts, node rank, standalone", "[cli]") {
  Cli cli;
  LaunchConfig c = cli.ok({"--nnodes", "1:4", cli.script});
  CHECK(c.shape.min_nodes == 1);
  CHECK(c.shape.max_nodes == 4);
  c = cli.ok({"--nnodes", "2", "--node-rank", "1", cli.script});
  CHECK(c.shape.min_nodes == 2);
  CHECK(c.shape.node_rank == 1);
  CHECK_THAT(cli.error({"--nnodes", "4:2", cli.script}),
             Contains("the minimum is above the maximum; write 2:4"));
  CHECK_THAT(cli.error({"--nnodes", "0", cli.script}),
             Contains("--nnodes '0': expected a node count"));
  CHECK_THAT(cli.error({"--nnodes", "2:20:30", cli.script}),
             Contains("a range MIN:MAX like 2:4 (one colon)"));
  CHECK_THAT(cli.error({"--nnodes", "2", "--node-rank", "2", cli.script}),
             Contains("--node-rank 2: node ranks run from 0 to 1"));
  CHECK_THAT(cli.error({"--node-rank", "-1", cli.script}), Contains("--node-rank -1"));
  CHECK_THAT(cli.error({"--standalone", "--nnodes", "2", cli.script}),
             Contains("--standalone runs a single node"));
  CHECK(cli.ok({"--standalone", cli.script}).rendezvous.standalone);
  // torchrun --standalone: a fresh uuid4 run id per launch, unless the user chose one.
  const std::string id = cli.ok({"--standalone", cli.script}).rendezvous.run_id;
  CHECK(id.size() == 36);
  CHECK(id[14] == '4');
  CHECK(id.find_first_not_of("0123456789abcdef-") == std::string::npos);
  CHECK(cli.ok({"--standalone", cli.script}).rendezvous.run_id != id);
  CHECK(cli.ok({"--standalone", "--rdzv-id", "mine", cli.script}).rendezvous.run_id == "mine");
  CHECK(cli.ok({cli.script}).rendezvous.run_id == "none");
}

TEST_CASE("cli: rendezvous address, port, endpoint and conf", "[cli]") {
  Cli cli;
  CHECK_THAT(cli.error({"--master-port", "70000", cli.script}),
             Contains("--master-port 70000: a port must be"));
  CHECK_THAT(cli.error({"--master-addr", "", cli.script}), Contains("--master-addr is empty"));
  LaunchConfig c = cli.ok({"--rdzv-endpoint", "10.1.2.3:29400", cli.script});
  CHECK(c.rendezvous.master_addr == "10.1.2.3");
  CHECK(c.rendezvous.master_port == 29400);
  c = cli.ok({"--rdzv-endpoint", "[fe80::1]:29401", cli.script});
  CHECK(c.rendezvous.master_addr == "fe80::1");
  CHECK(c.rendezvous.master_port == 29401);
  c = cli.ok({"--rdzv-endpoint", "head", "--master-port", "1111", cli.script});
  CHECK(c.rendezvous.master_addr == "head");
  CHECK(c.rendezvous.master_port == 1111);
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:1", "--master-addr", "b", cli.script}),
             Contains("disagree about the rendezvous host"));
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:1", "--master-port", "2", cli.script}),
             Contains("disagree about the rendezvous port"));
  CHECK_THAT(cli.error({"--rdzv-endpoint", "a:x", cli.script}), Contains("expected a port"));
  // No host name has a space or a comma: refused now, never retried for --rdzv-timeout.
  for (const char* bad : {"a b:29500", "a,b:29500", "a/b:29500"}) {
    CHECK_THAT(cli.error({"--nnodes", "2", "--rdzv-endpoint", bad, cli.script}),
               Contains("is no host name or address"));
  }
  CHECK(cli.ok({"--nnodes", "2", "--rdzv-endpoint", "node_1.cluster-a:29500", cli.script})
            .rendezvous.master_addr == "node_1.cluster-a");
  CHECK_THAT(cli.error({"--rdzv-backend", "zookeeper", cli.script}),
             Contains("expected static, c10d"));

  c = cli.ok({"--rdzv-conf", "join_timeout=600,last_call_timeout=30", cli.script});
  CHECK(c.rendezvous.conf.at("join_timeout") == "600");
  CHECK(c.rendezvous.conf.at("last_call_timeout") == "30");
  CHECK(cli.ok({cli.script}).rendezvous.timing.last_call == std::chrono::seconds(30));
  CHECK(cli.ok({"--rdzv-conf", "last_call_timeout=2.5", cli.script}).rendezvous.timing.last_call ==
        std::chrono::milliseconds(2500));
  CHECK(cli.ok({"--rdzv-last-call", "1", "--rdzv-conf", "last_call_timeout=9", cli.script})
            .rendezvous.timing.last_call == std::chrono::seconds(1));  // the flag wins
  CHECK_THAT(cli.error({"--rdzv-last-call", "-1", cli.script}),
             Contains("--rdzv-last-call -1") && Contains("expected seconds"));
  CHECK_THAT(cli.error({"--rdzv-conf", "last_call_timeout=soon", cli.script}),
             Contains("last_call_timeout=soon: expected a number"));
  CHECK_THAT(cli.error({"--rdzv-conf", "jion_timeout=5", cli.script}),
             Contains("unknown key 'jion_timeout'; known keys:") && Contains("join_timeout"));
  CHECK_THAT(cli.error({"--rdzv-conf", "timeout", cli.script}),
             Contains("item 'timeout' is not key=value"));
}

TEST_CASE("cli: --worker-store agent (the default), tiered (above 1024 nodes) or torch", "[cli]") {
  Cli cli;
  CHECK(cli.ok({cli.script}).rendezvous.worker_store == WorkerStore::kAgent);
  CHECK(cli.ok({"--worker-store", "tiered", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTiered);
  CHECK(cli.ok({"--worker-store", "torch", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTorch);
  CHECK_THAT(cli.error({"--worker-store", "rank0", cli.script}),
             Contains("--worker-store 'rank0': expected agent, tiered or torch"));
  // Above 1,024 nodes the default is tiered; a choice stays a choice.
  CHECK(cli.ok({"--nnodes", "1024", cli.script}).rendezvous.worker_store == WorkerStore::kAgent);
  CHECK(cli.ok({"--nnodes", "1025", cli.script}).rendezvous.worker_store == WorkerStore::kTiered);
  CHECK(cli.ok({"--nnodes", "1:2000", cli.script}).rendezvous.worker_store == WorkerStore::kTiered);
  CHECK(
      cli.ok({"--nnodes", "2000", "--worker-store", "agent", cli.script}).rendezvous.worker_store ==
      WorkerStore::kAgent);
  // torchrun 2.x's switch picks torch's own store unless the command line says otherwise.
  cli.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  CHECK(cli.ok({cli.script}).rendezvous.worker_store == WorkerStore::kTorch);
  CHECK(cli.ok({"--worker-store", "tiered", cli.script}).rendezvous.worker_store ==
        WorkerStore::kTiered);
}

TEST_CASE("cli: torchrun's rendezvous habits: c10d's port, free ports, etcd, conf spellings",
          "[cli]") {
  Cli cli;
  // An endpoint without a port means 29400 for c10d, as in torchrun.
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "head", cli.script})
            .rendezvous.master_port == 29400);
  // Kubeflow exports PET_MASTER_PORT beside the endpoint: the endpoint decides, no conflict.
  Cli kubeflow;
  kubeflow.env["PET_MASTER_PORT"] = "23456";
  kubeflow.env["PET_MASTER_ADDR"] = "elsewhere";
  const LaunchConfig k = kubeflow.ok(
      {"--rdzv-backend", "c10d", "--rdzv-endpoint", "head:29400", "--nnodes", "2", cli.script});
  CHECK(k.rendezvous.master_addr == "head");
  CHECK(k.rendezvous.master_port == 29400);
  CHECK(kubeflow.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "head", kubeflow.script})
            .rendezvous.master_port == 29400);
  // Port 0: a free port, for single-node jobs only (others could not find it).
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", cli.script})
            .rendezvous.master_port == 0);
  CHECK_THAT(cli.error({"--rdzv-endpoint", "localhost:0", "--nnodes", "2", cli.script}),
             Contains("port 0 asks for a free port, which only a single-node job can use"));
  // etcd: torchrun's etcd command lines (its docs', its run_test suite's) as they are; the
  // endpoint is etcd's, never the master's.
  for (const char* backend : {"etcd", "etcd-v2"}) {
    const LaunchConfig e = cli.ok({"--nnodes=1:4", "--nproc-per-node=2", "--rdzv-id=job7",
                                   std::string("--rdzv-backend=") + backend,
                                   "--rdzv-endpoint=etcd-host:2379", cli.script});
    REQUIRE(e.rendezvous.etcd);
    CHECK(e.rendezvous.etcd->endpoints == "etcd-host:2379");
    CHECK(e.rendezvous.etcd->prefix == "/torchelastic/p2p/job7");
    CHECK(e.rendezvous.master_addr == "127.0.0.1");
  }
  const LaunchConfig legacy =
      cli.ok({"--rdzv_backend=etcd", "--rdzv_endpoint=localhost:2379,localhost:2381",
              "--rdzv_id=r1", "--rdzv_conf=timeout=600,last_call_timeout=30,etcd_prefix=/elastic/",
              "--nnodes=2:3", cli.script});
  CHECK(legacy.rendezvous.etcd->prefix == "/elastic/r1");
  CHECK(legacy.rendezvous.timing.join_timeout == std::chrono::seconds(600));
  CHECK(legacy.rendezvous.etcd->lease_ttl == std::chrono::seconds(5));
  CHECK(cli.ok({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "h", "--rdzv-conf",
                "protocol=http,read_timeout=60,lease_ttl=3", cli.script})
            .rendezvous.etcd->lease_ttl == std::chrono::seconds(3));
  CHECK(cli.ok({"--rdzv-backend", "c10d", "--rdzv-endpoint", "h", cli.script}).rendezvous.etcd ==
        std::nullopt);
  // The default lease grows with the job: its renewals stay near 100 a second.
  const auto ttl_of = [&](const std::string& nnodes, const std::string& spares) {
    return cli
        .ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--nnodes", nnodes, "--spares",
             spares, cli.script})
        .rendezvous.etcd->lease_ttl;
  };
  CHECK(ttl_of("64", "0") == std::chrono::seconds(5));
  CHECK(ttl_of("1000:1024", "0") == std::chrono::seconds(30));
  CHECK(ttl_of("2000", "48") == std::chrono::seconds(61));
  CHECK(cli.ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--nnodes", "1024", "--rdzv-conf",
                "lease_ttl=5", cli.script})
            .rendezvous.etcd->lease_ttl == std::chrono::seconds(5));
  // What cannot work is refused by name.
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--nnodes", "2", cli.script}),
             Contains("needs the etcd members: --rdzv-endpoint host1:2379"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "password=hunter2", cli.script}),
             Contains("a password on the command line is seen by every user"));
  // TLS: etcd-v2's protocol=https puts every member on https; its file keys and etcd's.
  const std::string pem = cli.dir.write("ca.pem", "not read while parsing\n");
  const LaunchConfig v2 = cli.ok(
      {"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "a:2379,b:2379", "--rdzv-conf",
       "protocol=https,ca_cert=" + pem + ",ssl_cert=" + pem + ",ssl_cert_key=" + pem, cli.script});
  CHECK(v2.rendezvous.etcd->endpoints == "https://a:2379,https://b:2379");
  CHECK(v2.rendezvous.etcd->ca_file == pem);
  CHECK(v2.rendezvous.etcd->key_file == pem);
  const LaunchConfig v3 =
      cli.ok({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://a:2379,b:2379", "--rdzv-conf",
              "cert=" + pem, cli.script});
  CHECK(v3.rendezvous.etcd->endpoints == "https://a:2379,b:2379");
  CHECK(v3.rendezvous.etcd->ca_file.empty());  // the system's CA store
  CHECK(v3.rendezvous.etcd->key_file == pem);  // one PEM with both, as torchrun takes it
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "cacert=/no/ca.pem", cli.script}),
             Contains("cacert=/no/ca.pem: no such file"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "cacert=" + pem, cli.script}),
             Contains("gives TLS files, but every etcd member is plain http"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "key=" + pem, cli.script}),
             Contains("has no certificate; add cert=PATH"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379",
                        "--rdzv-conf", "protocol=http", cli.script}),
             Contains("protocol=http, but the member https://h:2379 asks for TLS"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "protocol=grpc", cli.script}),
             Contains("protocol=grpc: etcd is reached over http or https"));
  CHECK_THAT(cli.error({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf",
                        "user=root", cli.script}),
             Contains("etcd user 'root' has no password"));
  CHECK_THAT(cli.error({"--rdzv-conf", "etcd_prefix=/x", cli.script}),
             Contains("an etcd setting, but --rdzv-backend is static"));
  // Blanks and quotes around values, as torchrun's parser takes them; torch's boolean words.
  const LaunchConfig q =
      cli.ok({"--rdzv-conf", " join_timeout = '600' ,is_host=\"False\",use_libuv=1", cli.script});
  CHECK(q.rendezvous.conf.at("join_timeout") == "600");
  CHECK(q.rendezvous.is_host == false);
  CHECK(cli.ok({"--rdzv-conf", "is_host=yes", cli.script}).rendezvous.is_host == true);
  CHECK_FALSE(cli.ok({cli.script}).rendezvous.is_host.has_value());
  CHECK_THAT(cli.error({"--rdzv-conf", "is_host=maybe", cli.script}),
             Contains("is_host=maybe: expected true or false"));
  CHECK_THAT(cli.error({"--rdzv-conf", "timeout= ", cli.script}),
             Contains("'timeout' has no value"));
}

}  // namespace test_command_line_rendezvous
