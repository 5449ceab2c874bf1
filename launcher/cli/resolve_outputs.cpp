#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"
#include "config/line_prefix.hpp"

namespace npu_run {

void resolve_outputs(const LaunchInputs& in, int nproc_per_node, OutputConfig& output) {
  const OutputFlags& f = in.options.output;
  output.redirects = RankStreamMap::parse(*f.redirects, f.redirects.source());
  output.tee = RankStreamMap::parse(*f.tee, f.tee.source());
  for (const auto& [map, flag] :
       {std::pair{&output.redirects, &f.redirects}, std::pair{&output.tee, &f.tee}}) {
    if (map->highest_named_rank() >= nproc_per_node) {
      throw UsageError(fmt::format(
          "{} '{}': local rank {} does not exist with {} worker{} per node", flag->source(), **flag,
          map->highest_named_rank(), nproc_per_node, nproc_per_node == 1 ? "" : "s"));
    }
  }
  output.stdout_filters = parse_line_filters(*f.stdout_filters);
  output.stderr_filters = parse_line_filters(*f.stderr_filters);
  const bool filtered = !output.stdout_filters.empty() || !output.stderr_filters.empty();
  if (!f.log_dir->empty()) {
    // As torchrun: the directory holds error files; -r/-t say which streams go to files.
    output.log_dir = *f.log_dir;
  } else if (!output.redirects.empty() || !output.tee.empty() || filtered) {
    output.log_dir_is_temporary = true;  // as torchrun: files go to a fresh directory under $TMPDIR
  }
  if (!f.local_ranks_filter->empty()) {
    output.local_ranks_filter =
        parse_rank_filter(*f.local_ranks_filter, f.local_ranks_filter.source(), nproc_per_node);
  }
  if (f.prefix_template.given()) {
    validate_prefix_template(*f.prefix_template, f.prefix_template.source());
    output.prefix_template = *f.prefix_template;
  } else if (const auto from_env = lookup(in.env, kPrefixTemplateVariable)) {
    validate_prefix_template(*from_env, kPrefixTemplateVariable);
    output.prefix_template = *from_env;
  }
}

}  // namespace npu_run
