#include "cli/parse_launch.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "basics/usage_error.hpp"
#include "cli/completion_scripts.hpp"
#include "cli/launch_options.hpp"
#include "cli/resolvers.hpp"
#include "npu_run/version.hpp"

namespace npu_run {

namespace {

// The parts of the command line: options, then the script and its arguments.
struct Split {
  std::vector<std::string> options;
  std::vector<std::string> script_and_args;
  bool after_separator = false;  // "npu_run [OPTIONS] -- SCRIPT": even "-x" is the script
};

Split split_at_script(const std::vector<std::string>& args, const CLI::App& app) {
  std::vector<std::string> remaining = app.remaining();
  Split s;
  s.options.assign(args.begin(), args.end() - static_cast<std::ptrdiff_t>(remaining.size()));
  s.after_separator = !remaining.empty() && remaining.front() == "--";
  if (s.after_separator) remaining.erase(remaining.begin());
  s.script_and_args = std::move(remaining);
  return s;
}

ParsedLaunch resolve(const LaunchOptions& options, const std::vector<std::string>& script_and_args,
                     const EnvMap& env, HostProbe& host) {
  const ShapeFlags& f = options.shape;
  if (*f.agents_per_node < 1 || *f.agents_per_node > 1024) {
    throw UsageError(
        fmt::format("{} {}: expected 1 to 1024", f.agents_per_node.source(), *f.agents_per_node));
  }
  // A launcher's environment gives defaults; flags and PET_ variables win.
  const ClusterDefaults cluster =
      detect_cluster(env, parse_cluster_kind(*f.cluster, f.cluster.source()), *f.agents_per_node);
  const LaunchInputs in{options, env, host, cluster};
  ParsedLaunch parsed{LaunchConfig{}, cluster.facts};
  LaunchConfig& cfg = parsed.config;
  resolve_shape(in, cfg.shape);
  resolve_placement(in, cfg.shape, cfg.placement);
  resolve_rendezvous(in, cfg.shape, cfg.rendezvous, parsed.cluster.warnings);
  resolve_supervision(in, cfg.supervision, cfg.agent);
  resolve_ascend(in, cfg.shape, cfg.ascend);
  resolve_health(in, cfg.health);
  resolve_outputs(in, cfg.shape.nproc_per_node, cfg.output);
  resolve_records(in, cfg.output, cfg.records);
  resolve_snapshots(in, cfg.snapshots);
  resolve_worker(in, script_and_args, cfg.worker);
  resolve_numa(in, cfg.shape, cfg.worker);
  resolve_framework(in, cfg);
  resolve_preflight(in, cfg);
  resolve_straggler(in, cfg);
  return parsed;
}

// --print-completion SHELL: the script is the whole answer, whatever else was typed.
EarlyExit completion_exit(const std::string& shell) {
  const auto* known = std::find(std::begin(kCompletionShells), std::end(kCompletionShells), shell);
  if (known == std::end(kCompletionShells)) {
    return usage_error(fmt::format("--print-completion '{}': there are completion scripts for {}",
                                   shell, fmt::join(kCompletionShells, ", ")));
  }
  EarlyExit exit;
  exit.completion = shell;
  return exit;
}

}  // namespace

ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env,
                               HostProbe& host) {
  LaunchOptions options;
  std::vector<std::string> expanded;
  try {
    expanded = spell_out_options(args, options.app());
  } catch (const UsageError& e) {
    return usage_error(e.what());
  }
  try {
    std::vector<std::string> reversed(expanded.rbegin(), expanded.rend());
    options.app().parse(reversed);
    options.names().apply_environment(env);
  } catch (const CLI::CallForHelp&) {
    options.names().show_variables_in_help();
    return EarlyExit{0, options.app().help(), false, false, true};
  } catch (const CLI::CallForVersion&) {
    return EarlyExit{0, std::string("npu_run ") + kVersion + "\n", false, true};
  } catch (const CLI::ExcludesError& e) {
    return usage_error(options.exclusion_reason(e.what()));
  } catch (const CLI::ParseError& e) {
    const std::string what = explain_parse_error(e, options.app());
    return usage_error(what + options.names().env_hint(what, env));
  }
  if (options.agent.print_completion.given())
    return completion_exit(*options.agent.print_completion);
  Split split = split_at_script(expanded, options.app());
  options.names().set_typed(split.options);
  if (split.script_and_args.empty())
    return usage_error("no training script given; usage: npu_run [OPTIONS] SCRIPT [ARGS...]");
  // With prefix_command(), an unknown option ends parsing just like the script would.
  const std::string& first = split.script_and_args.front();
  if (!split.after_separator && first.size() > 1 && first[0] == '-')
    return usage_error(unknown_option_message(first, OptionNames::long_names(options.app())));
  if (options.launches_hosts()) {
    try {
      return ParsedHosts{resolve_hosts(options, split.script_and_args, env, host)};
    } catch (const UsageError& e) {
      return usage_error(e.what());
    }
  }
  auto resolved = resolve_or_exit(
      [&] { return resolve(options, split.script_and_args, env, host); }, "npu_run");
  if (auto* early = std::get_if<EarlyExit>(&resolved)) return std::move(*early);
  return std::move(std::get<ParsedLaunch>(resolved));
}

ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env) {
  const auto host = real_host(env);
  return parse_command_line(args, env, *host);
}

}  // namespace npu_run
