#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"
#include "config/line_prefix.hpp"

namespace npu_run {

void resolve_outputs(const LaunchInputs& in, int nproc_per_node, OutputConfig& output) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  output.redirects = RankStreamMap::parse(f.redirects, o.source(o.redirects));
  output.tee = RankStreamMap::parse(f.tee, o.source(o.tee));
  for (const auto& [map, option, text] : {std::tuple{&output.redirects, o.redirects, f.redirects},
                                          std::tuple{&output.tee, o.tee, f.tee}}) {
    if (map->highest_named_rank() >= nproc_per_node) {
      throw UsageError(fmt::format(
          "{} '{}': local rank {} does not exist with {} worker{} per node", o.source(option), text,
          map->highest_named_rank(), nproc_per_node, nproc_per_node == 1 ? "" : "s"));
    }
  }
  output.stdout_filters = parse_line_filters(f.stdout_filters);
  output.stderr_filters = parse_line_filters(f.stderr_filters);
  const bool filtered = !output.stdout_filters.empty() || !output.stderr_filters.empty();
  if (!f.log_dir.empty()) {
    // As torchrun: the directory holds error files; -r/-t say which streams go to files.
    output.log_dir = f.log_dir;
  } else if (!output.redirects.empty() || !output.tee.empty() || filtered) {
    output.log_dir_is_temporary = true;  // as torchrun: files go to a fresh directory under $TMPDIR
  }
  if (!f.local_ranks_filter.empty()) {
    output.local_ranks_filter =
        parse_rank_filter(f.local_ranks_filter, o.source(o.filter), nproc_per_node);
  }
  if (OptionNames::given(o.prefix)) {
    validate_prefix_template(f.prefix_template, o.source(o.prefix));
    output.prefix_template = f.prefix_template;
  } else if (const auto from_env = lookup(in.env, kPrefixTemplateVariable)) {
    validate_prefix_template(*from_env, kPrefixTemplateVariable);
    output.prefix_template = *from_env;
  }
}

}  // namespace npu_run
