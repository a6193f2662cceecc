#pragma once
// A GoogleTest fixture whose tests share the bundled model, loaded once per
// test suite (engine tests that need a Model but build their own contexts).

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/test_support.h"

namespace agentkv::engine::testing {

class BundledModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::Load(BundledModelPath());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static inline Model* model_ = nullptr;
};

}  // namespace agentkv::engine::testing
