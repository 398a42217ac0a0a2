// Cairn: distributed checkpoint/restart for MPI simulation codes.
// Umbrella header: includes the whole public C++ API.
#pragma once

#include "cairn/async.hpp"
#include "cairn/box.hpp"
#include "cairn/checkpoint.hpp"
#include "cairn/config.hpp"
#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "cairn/dtype.hpp"
#include "cairn/errors.hpp"
#include "cairn/log.hpp"
#include "cairn/manager.hpp"
#include "cairn/plan.hpp"
#include "cairn/rows.hpp"
#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"
#include "cairn/storage.hpp"
