#include "doctor/doctor.hpp"

#include <iostream>

#include "commands/commands.hpp"

namespace npu_run {

int doctor(const DoctorCommand& command) {
  const auto results = run_doctor(command.settings);
  std::cout << (command.json ? format_doctor_json(command.settings, results)
                             : format_doctor_text(command.settings, results));
  return doctor_exit_code(results);
}

}  // namespace npu_run
