#include "cli/option_set.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <type_traits>

namespace npu_run {

namespace {

std::string names_of(const OptionRow& row) {
  std::string names = OptionNames::spellings(row.name);
  if (std::strlen(row.also) > 0) names += std::string(",") + row.also;
  return names;
}

std::string variable_of(const OptionRow& row, bool pet) {
  switch (row.variable.kind) {
    case OptionVariable::Kind::kPet:
      return pet ? OptionNames::env_name(row.name) : "";
    case OptionVariable::Kind::kNamed:
      // A PET_ variable belongs to the launch, like the derived ones.
      return pet || std::strncmp(row.variable.name, "PET_", 4) != 0 ? row.variable.name : "";
    case OptionVariable::Kind::kNone:
      return "";
  }
  return "";
}

}  // namespace

OptionSet::OptionSet(std::unique_ptr<CLI::App> app) : app_(std::move(app)) {}

OptionSet::~OptionSet() = default;

bool OptionSet::reaches_agents(const CLI::Option* option) const {
  return std::find(launcher_only_.begin(), launcher_only_.end(), option) == launcher_only_.end();
}

CLI::Option* OptionSet::note(CLI::Option* option, const OptionRow& row, const char* group,
                             bool pet) {
  option->group(group);
  if (std::strlen(row.type) > 0) option->type_name(row.type);
  if (const std::string variable = variable_of(row, pet); !variable.empty())
    names_.bind(option, variable);
  if (row.reach == Reach::kLauncher) launcher_only_.push_back(option);
  return option;
}

template <typename T>
CLI::Option* OptionSet::add(const OptionRow& row, const char* group, bool pet, T& target) {
  CLI::Option* option = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    option = app_->add_flag(names_of(row), target, row.help);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    // Given again and again, one value each time ("--env A --env B script.py": the script is
    // not a third value).
    option = app_->add_option(names_of(row), target, row.help)
                 ->expected(1)
                 ->allow_extra_args(false)
                 ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  } else {
    option = app_->add_option(names_of(row), target, row.help);
  }
  return note(option, row, group, pet);
}

template <typename T>
Flag<T>::Flag(FlagGroup& group, const OptionRow& row, T initial)
    : value_(std::move(initial)),
      names_(group.set().names()),
      option_(group.set().add(row, group.name(), group.pet(), value_)) {}

template class Flag<std::string>;
template class Flag<int>;
template class Flag<double>;
template class Flag<bool>;
template class Flag<std::vector<std::string>>;

}  // namespace npu_run
