// A job's profile as the registry would hold it before the planner's conversion
// (controller::ToPlannerProfile): its period, its phase at a NIC's rate, the bytes each phase
// reduces and its compute. From what a pod or a TrafficProfile declares (a period and a gradient
// size, or a model of the model table) or from what the shims measured in an earlier run.
// Declared numbers may be anything positive: every conversion saturates (no period beyond
// about 30 years, no gradient beyond 10^18 bytes), and the planner refuses what is absurd.
#pragma once

#include <optional>
#include <string>

#include "metronome/controller/profile.hpp"
#include "metronome/extender/state.hpp"
#include "metronome/models/model_table.hpp"

namespace metronome::extender {

// V = 2(n−1)/n · S: the bytes one rank moves per ring all-reduce of S bytes over n ranks.
double RingVolume(double gradient_bytes, int ranks);

// A declared period and gradient size; the phase is the ring all-reduce's wire time at `nic`.
MeasuredProfile ProfileFromPeriod(double period_ms, double gradient_mb, double nic, int ranks);
// A model of the table on a GPU type (nullopt: no table, or the model or GPU is not in it).
std::optional<MeasuredProfile> ProfileFromModel(const std::string& model, const std::string& gpu,
                                                double nic, int ranks,
                                                const models::ModelTable* models);
// A declared TrafficProfile: its period and gradient, else its model (nullopt: neither).
std::optional<MeasuredProfile> ProfileFromDeclared(const DeclaredProfile& declared,
                                                   const std::string& gpu, double nic, int ranks,
                                                   const models::ModelTable* models);
// A profile measured in an earlier run, with 0 < comm <= period.
MeasuredProfile ProfileFromMeasured(const MeasuredProfile& measured);

}  // namespace metronome::extender
