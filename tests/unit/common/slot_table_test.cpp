// SPDX-License-Identifier: BSD-3-Clause
#include "common/slot_table.h"

#include <gtest/gtest.h>

#include <string>

namespace nscache {
namespace {

TEST(SlotTable, FindsWhatWasAddedUntilRemoved) {
    SlotTable<std::string> table;
    SlotTable<std::string>::Id a, b;
    *table.add(a) = "a";
    *table.add(b) = "b";
    ASSERT_NE(table.find(a), nullptr);
    EXPECT_EQ(*table.find(a), "a");
    EXPECT_EQ(*table.find(b), "b");
    EXPECT_EQ(table.size(), 2u);
    EXPECT_TRUE(table.remove(a));
    EXPECT_EQ(table.find(a), nullptr);
    EXPECT_FALSE(table.remove(a));  // twice: nothing
    EXPECT_EQ(table.size(), 1u);
}

TEST(SlotTable, ReusedSlotDoesNotAnswerTheOldId) {
    SlotTable<int> table;
    SlotTable<int>::Id old_id, new_id;
    *table.add(old_id) = 1;
    table.remove(old_id);
    int* fresh = table.add(new_id);
    EXPECT_EQ(*fresh, 0);  // a fresh value, not the old one
    EXPECT_EQ(static_cast<uint32_t>(old_id), static_cast<uint32_t>(new_id));  // same slot
    EXPECT_EQ(table.find(old_id), nullptr);
    EXPECT_NE(table.find(new_id), nullptr);
}

TEST(SlotTable, CapacityIsABound) {
    SlotTable<int> table(2);
    SlotTable<int>::Id ids[3];
    EXPECT_NE(table.add(ids[0]), nullptr);
    EXPECT_NE(table.add(ids[1]), nullptr);
    EXPECT_EQ(table.add(ids[2]), nullptr);
    table.remove(ids[0]);
    EXPECT_NE(table.add(ids[2]), nullptr);
}

TEST(SlotTable, PointersStayValidWhileTheTableGrows) {
    SlotTable<int> table;
    SlotTable<int>::Id first;
    int* p = table.add(first);
    *p = 42;
    for (int i = 0; i < 10000; ++i) {
        SlotTable<int>::Id id;
        table.add(id);
    }
    EXPECT_EQ(*p, 42);
    EXPECT_EQ(table.find(first), p);
}

TEST(SlotTable, UnknownIdsFindNothing) {
    SlotTable<int> table;
    EXPECT_EQ(table.find(0), nullptr);
    EXPECT_EQ(table.find(~uint64_t{0}), nullptr);
    SlotTable<int>::Id id;
    table.add(id);
    EXPECT_EQ(table.find(id + (uint64_t{1} << 32)), nullptr);  // another generation
}

}  // namespace
}  // namespace nscache
