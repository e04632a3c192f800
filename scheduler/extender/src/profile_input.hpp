// A job's profile as the registry would hold it before the planner's conversion
// (controller::ToPlannerJob): its period, its phase at a NIC's rate, the bytes each phase
// reduces and its compute. From what a pod or a TrafficProfile declares (a period and a gradient
// size, or a model of the model table) or from what the shims measured in an earlier run.
#pragma once

#include <optional>
#include <string>

#include "metronome/controller/planning.hpp"
#include "metronome/extender/state.hpp"
#include "metronome/models/model_table.hpp"

namespace metronome::extender {

// V = 2(n−1)/n · S: the bytes one rank moves per ring all-reduce of S bytes over n ranks.
double RingVolume(double gradient_bytes, int ranks);

// A declared period and gradient size; the phase is the ring all-reduce's wire time at `nic`.
controller::PlanJob InputFromPeriod(double period_ms, double gradient_mb, double nic, int ranks);
// A model of the table on a GPU type (nullopt: no table, or the model or GPU is not in it).
std::optional<controller::PlanJob> InputFromModel(const std::string& model, const std::string& gpu,
                                                  double nic, int ranks,
                                                  const models::ModelTable* models);
// A declared TrafficProfile: its period and gradient, else its model (nullopt: neither).
std::optional<controller::PlanJob> InputFromDeclared(const DeclaredProfile& declared,
                                                     const std::string& gpu, double nic, int ranks,
                                                     const models::ModelTable* models);
controller::PlanJob InputFromMeasured(const MeasuredProfile& measured);

}  // namespace metronome::extender
