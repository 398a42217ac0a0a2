// Field-by-field Catch2 comparisons of plans, write results and metadata
// (the structs of include/cairn/plan.hpp have no operator==).
#pragma once

#include "unit_common.hpp"

#include "cairn/plan.hpp"

#include <iterator>
#include <vector>

namespace cairn_test {

inline void check_same(const cairn::StorageInfo& a, const cairn::StorageInfo& b)
{
    CHECK(a.path == b.path);
    CHECK(a.offset == b.offset);
    CHECK(a.length == b.length);
}

inline void check_same(const cairn::WriteItem& a, const cairn::WriteItem& b)
{
    INFO("write item '" << a.fqn << "'");
    CHECK(a.fqn == b.fqn);
    CHECK(a.kind == b.kind);
    CHECK(a.dtype == b.dtype);
    CHECK(a.global_shape == b.global_shape);
    CHECK(a.box == b.box);
    CHECK(a.nbytes == b.nbytes);
    CHECK(a.digest == b.digest);
    CHECK(a.value == b.value);
    CHECK(a.chunk == b.chunk);
}

inline void check_same(const cairn::ReadItem& a, const cairn::ReadItem& b)
{
    INFO("read item '" << a.fqn << "'");
    CHECK(a.fqn == b.fqn);
    CHECK(a.kind == b.kind);
    CHECK(a.chunk == b.chunk);
    CHECK(a.box == b.box);
    CHECK(a.shard == b.shard);
}

inline void check_same(const cairn::WriteResult& a, const cairn::WriteResult& b)
{
    INFO("write result '" << a.fqn << "'");
    CHECK(a.fqn == b.fqn);
    CHECK(a.chunk == b.chunk);
    check_same(a.storage, b.storage);
}

template <class T>
void check_same(const std::vector<T>& a, const std::vector<T>& b)
{
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        check_same(a[i], b[i]);
}

inline void check_same(const cairn::SavePlan& a, const cairn::SavePlan& b)
{
    check_same(a.items, b.items);
    CHECK(a.storage_data == b.storage_data);
    CHECK(a.planner_data == b.planner_data);
}

inline void check_same(const cairn::LoadPlan& a, const cairn::LoadPlan& b)
{
    check_same(a.items, b.items);
    CHECK(a.storage_data == b.storage_data);
    CHECK(a.planner_data == b.planner_data);
}

inline void check_same(const cairn::EntryMeta& a, const cairn::EntryMeta& b)
{
    CHECK(a.kind == b.kind);
    CHECK(a.dtype == b.dtype);
    CHECK(a.global_shape == b.global_shape);
    CHECK(a.value == b.value);
    REQUIRE(a.chunks.size() == b.chunks.size());
    for (std::size_t i = 0; i < a.chunks.size(); ++i) {
        INFO("chunk " << i);
        CHECK(a.chunks[i].box == b.chunks[i].box);
        check_same(a.chunks[i].storage, b.chunks[i].storage);
    }
}

inline void check_same(const cairn::Metadata& a, const cairn::Metadata& b)
{
    CHECK(a.format_version == b.format_version);
    CHECK(a.library_version == b.library_version);
    CHECK(a.world_size == b.world_size);
    CHECK(a.layout == b.layout);
    CHECK(a.created == b.created);
    REQUIRE(a.entries.size() == b.entries.size());
    for (auto ia = a.entries.begin(), ib = b.entries.begin(); ia != a.entries.end(); ++ia, ++ib) {
        INFO("entry '" << ia->first << "'");
        REQUIRE(ia->first == ib->first);
        check_same(ia->second, ib->second);
    }
}

} // namespace cairn_test
