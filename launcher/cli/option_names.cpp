#include "cli/option_names.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

#include "basics/usage_error.hpp"

namespace npu_run {

std::string OptionNames::spellings(const std::string& dashed) {
  std::string underscored = dashed;
  std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
  return underscored == dashed ? dashed : dashed + "," + underscored;
}

std::string OptionNames::env_name(const std::string& dashed) {
  std::string name = "PET_";
  for (char c : dashed.substr(2)) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

void OptionNames::bind(CLI::Option* option, std::string variable) {
  variables_[option] = std::move(variable);
}

void OptionNames::apply_environment(const EnvMap& env) {
  for (const auto& [option, variable] : variables_) {
    if (option->count() > 0) continue;  // the command line wins
    const auto value = lookup(env, variable);
    if (!value) continue;
    option->add_result(*value);
    from_env_[option] = variable;
    option->run_callback();
  }
}

std::string OptionNames::source(const CLI::Option* option) const {
  for (const std::string& token : typed_) {
    if (token.size() < 2 || token[0] != '-') continue;
    if (token[1] == '-') {
      const std::string name = token.substr(2, token.find('=') - 2);
      if (option->check_lname(name)) return "--" + name;
    } else if (option->check_sname(token.substr(1, 1))) {
      return token.substr(0, 2);
    }
  }
  if (const auto it = from_env_.find(option); it != from_env_.end()) return it->second;
  const auto& longs = option->get_lnames();
  return longs.empty() ? "-" + option->get_snames().front() : "--" + longs.front();
}

bool OptionNames::given(const CLI::Option* option) {
  return option->count() > 0;
}

std::string OptionNames::env_hint(const std::string& message, const EnvMap& env) const {
  std::string hint;
  for (const auto& [option, variable] : variables_) {
    const auto value = lookup(env, variable);
    if (!value) continue;
    for (const auto& name : option->get_lnames()) {
      if (message.find("--" + name) != std::string::npos)
        hint = fmt::format(" (note: {}={} is set in the environment)", variable, *value);
    }
  }
  return hint;
}

void OptionNames::show_variables_in_help() {
  for (const auto& [option, variable] : variables_) option->envname(variable);
}

std::vector<std::string> OptionNames::long_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

namespace {

// The option a long name (without "--") belongs to, exactly or as the only option it abbreviates;
// nullptr when it fits none. `ambiguous` lists the candidates when it fits several.
const CLI::Option* option_for_long_name(const CLI::App& app, const std::string& name,
                                        std::vector<std::string>& ambiguous) {
  std::vector<const CLI::Option*> fits;
  for (const CLI::Option* option : app.get_options()) {
    for (const auto& long_name : option->get_lnames()) {
      if (long_name == name) return option;
      if (long_name.rfind(name, 0) == 0 && (fits.empty() || fits.back() != option))
        fits.push_back(option);
    }
  }
  if (fits.size() > 1) {
    for (const CLI::Option* option : fits) ambiguous.push_back("--" + option->get_lnames().front());
    return nullptr;
  }
  return fits.empty() ? nullptr : fits.front();
}

std::string underscored(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

bool takes_value(const CLI::Option* option) {
  return option->get_items_expected_max() > 0;
}

}  // namespace

std::vector<std::string> spell_out_options(const std::vector<std::string>& args,
                                           const CLI::App& app) {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& token = out[i];
    if (token == "--" || token.size() < 2 || token[0] != '-') break;  // the script starts here
    const CLI::Option* option = nullptr;
    const size_t equals = token.find('=');
    const bool empty_value = equals != std::string::npos && equals + 1 == token.size();
    if (token[1] == '-') {
      const std::string name = token.substr(2, equals == std::string::npos ? equals : equals - 2);
      std::vector<std::string> ambiguous;
      option = option_for_long_name(app, name, ambiguous);
      if (!ambiguous.empty()) {
        throw UsageError(
            fmt::format("ambiguous option '--{}' could be {}", name, fmt::join(ambiguous, ", ")));
      }
      if (option == nullptr) break;  // unknown: reported by the parser
      if (!option->check_lname(name)) {
        const std::string& full = option->get_lnames().front();
        // Keep the spelling family the user typed (underscores or dashes).
        std::string written =
            "--" + (name.find('_') != std::string::npos ? underscored(full) : full);
        if (equals != std::string::npos) written += token.substr(equals);
        out[i] = written;
      }
      // "--role=": the empty value, as argparse reads it. CLI11 would take the next word
      // instead (the script), so the value becomes a word of its own.
      if (empty_value && takes_value(option)) {
        out[i].pop_back();
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::string());
        ++i;
        continue;
      }
    } else {
      option = app.get_option_no_throw(token.substr(0, 2));
      if (option == nullptr) break;
      if (token.size() > 2) continue;  // "-t3": the value is attached
    }
    if (equals == std::string::npos && takes_value(option)) ++i;  // its value
  }
  return out;
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string unknown_option_message(const std::string& token,
                                   const std::vector<std::string>& names) {
  const std::string name = token.substr(0, token.find('='));
  std::string best;
  size_t best_distance = 4;  // beyond 3 edits a suggestion is more confusing than helpful
  for (const auto& candidate : names) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  }
  if (!best.empty()) return fmt::format("unknown option '{}'; did you mean '{}'?", name, best);
  // usage_error() adds the line that points to --help: once is enough.
  return fmt::format(
      "unknown option '{}' (the training script must come after all npu_run options)", name);
}

}  // namespace npu_run
