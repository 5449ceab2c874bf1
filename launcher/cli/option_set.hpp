// Each option declared once, where its value is kept: a Flag<T> member of a FlagGroup names its
// row (spellings, PET_ variable, help, value type, who reads it in a launch over ssh) and
// registers itself, in the order declared, with the command's CLI11 table (--help and the
// completion read that), its environment variable (applied after parsing, OptionNames), and the
// forwarding of a launch over ssh. The value, the CLI11 option and how the user spelt it travel
// together: `*f.term_timeout`, `f.term_timeout.source()`, `f.term_timeout.given()`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli11_fwd.hpp"
#include "cli/option_names.hpp"

namespace npu_run {

// The environment variable an option also comes from, when the command line does not give it.
struct OptionVariable {
  enum class Kind { kPet, kNamed, kNone };
  Kind kind = Kind::kPet;
  const char* name = "";
};
// PET_<NAME>, as torchrun reads them (PET_NPROC_PER_NODE for --nproc-per-node).
inline constexpr OptionVariable kPetVariable{};
inline constexpr OptionVariable kNoVariable{OptionVariable::Kind::kNone};
constexpr OptionVariable variable_named(const char* name) {
  return {OptionVariable::Kind::kNamed, name};
}

// Who reads an option in a launch over ssh (--hosts): each host's agent, to which the launcher
// passes it as given, or the launcher alone.
enum class Reach { kAgents, kLauncher };

// One option: everything about it but the type and default of its value, which its Flag gives.
// Written with designated initializers: {.name = "--devices", .help = "...", .type = "LIST"}.
struct OptionRow {
  const char* name = "";  // "--nproc-per-node"; "--nproc_per_node" is made from it
  const char* help = "";  // --help's text
  const char* also = "";  // more names, CLI11's comma list ("--nproc", "-r")
  const char* type = "";  // the value's name in --help and the completion (FILE, DIR, {a,b})
  OptionVariable variable = kPetVariable;
  Reach reach = Reach::kAgents;
};

// A command's options: its CLI11 table, the variables of its options, and who reads each.
class OptionSet {
 public:
  // `app` is configured before any Flag registers (a default policy applies to options added
  // after it is set).
  explicit OptionSet(std::unique_ptr<CLI::App> app);
  ~OptionSet();
  OptionSet(const OptionSet&) = delete;
  OptionSet& operator=(const OptionSet&) = delete;

  CLI::App& app() const { return *app_; }
  OptionNames& names() { return names_; }
  const OptionNames& names() const { return names_; }
  // Whether a launch over ssh passes `option` on to each host's agent.
  bool reaches_agents(const CLI::Option* option) const;

  // Adds `row` to the table (Flag does), its variable unless `pet` is off and it is a PET_ one.
  template <typename T>
  CLI::Option* add(const OptionRow& row, const char* group, bool pet, T& target);

 private:
  CLI::Option* note(CLI::Option* option, const OptionRow& row, const char* group, bool pet);

  std::unique_ptr<CLI::App> app_;
  OptionNames names_;
  std::vector<const CLI::Option*> launcher_only_;
};

// The options of one --help group, declared as Flag members in the order --help lists them.
class FlagGroup {
 public:
  // `pet` false: the rows' PET_ variables do not apply (a command torchrun does not have).
  FlagGroup(OptionSet& set, const char* name, bool pet = true)
      : set_(set), name_(name), pet_(pet) {}
  FlagGroup(const FlagGroup&) = delete;
  FlagGroup& operator=(const FlagGroup&) = delete;

  OptionSet& set() const { return set_; }
  const char* name() const { return name_; }
  bool pet() const { return pet_; }

 private:
  OptionSet& set_;
  const char* name_;
  bool pet_;
};

// An option's value, filled by CLI11 or by its variable, beside the option it came from.
// std::vector<std::string> values repeat ("--env A --env B": each time one value).
template <typename T>
class Flag {
 public:
  Flag(FlagGroup& group, const OptionRow& row, T initial = T{});
  Flag(const Flag&) = delete;
  Flag& operator=(const Flag&) = delete;

  const T& operator*() const { return value_; }
  const T* operator->() const { return &value_; }
  CLI::Option* option() const { return option_; }
  // The spelling the user typed ("-t", "--nproc_per_node"), else the variable the value came
  // from, else the option's first long name: what messages name.
  std::string source() const { return names_.source(option_); }
  // Given on the command line or through its variable.
  bool given() const { return OptionNames::given(option_); }
  // Given through its variable only (PET_MASTER_PORT from Kubeflow, not a flag the user typed).
  bool from_environment() const { return names_.from_environment(option_); }

 private:
  T value_;
  const OptionNames& names_;
  CLI::Option* option_;
};

extern template class Flag<std::string>;
extern template class Flag<int>;
extern template class Flag<double>;
extern template class Flag<bool>;
extern template class Flag<std::vector<std::string>>;

}  // namespace npu_run
