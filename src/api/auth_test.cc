#include "api/auth.h"

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

TEST(AuthTest, NoKeysMeansDefaultNamespace) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  EXPECT_EQ(*keys.Authenticate(""), "default");
  EXPECT_EQ(*keys.Authenticate("Bearer anything"), "default");
}

TEST(AuthTest, EachKeyItsOwnStableNamespace) {
  Result<ApiKeys> keys = ApiKeys::Parse({"sk-one", "team-b:sk-two"});
  ASSERT_TRUE(keys.ok());
  Result<std::string> a = keys->Authenticate("Bearer sk-one");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->rfind("key-", 0), 0u);
  EXPECT_EQ(a->size(), 4u + 16u);
  EXPECT_EQ(*ApiKeys::Parse({"sk-one"})->Authenticate("Bearer sk-one"), *a);  // stable
  EXPECT_EQ(*keys->Authenticate("bearer sk-two"), "team-b");
}

TEST(AuthTest, IsolatedAttribute) {
  Result<ApiKeys> keys = ApiKeys::Parse({"team:sk-iso:isolated", "team:sk-open", "other:sk:x"});
  ASSERT_TRUE(keys.ok());
  Result<ApiKeys::Tenant> iso = keys->AuthenticateTenant("Bearer sk-iso");
  ASSERT_TRUE(iso.ok());
  EXPECT_EQ(iso->namespace_id, "team");
  EXPECT_TRUE(iso->isolated);
  EXPECT_FALSE(keys->Authenticate("Bearer sk-iso:isolated").ok());  // the attribute is not part of the key
  EXPECT_FALSE(keys->AuthenticateTenant("Bearer sk-open")->isolated);
  EXPECT_EQ(*keys->Authenticate("Bearer sk:x"), "other");  // other colons stay in the key
  EXPECT_FALSE(ApiKeys().AuthenticateTenant("")->isolated);
}

TEST(AuthTest, RefusesMissingWrongOrMalformedKeys) {
  ApiKeys keys = *ApiKeys::Parse({"sk-one"});
  for (const char* h : {"", "Bearer", "Bearer ", "Basic sk-one", "sk-one", "Bearer sk-on",
                        "Bearer sk-one2"}) {
    EXPECT_FALSE(keys.Authenticate(h).ok()) << h;
  }
}

TEST(AuthTest, RefusesBadSpecs) {
  EXPECT_FALSE(ApiKeys::Parse({""}).ok());
  EXPECT_FALSE(ApiKeys::Parse({"ns:"}).ok());
  EXPECT_FALSE(ApiKeys::Parse({"../x:key"}).ok());
  EXPECT_FALSE(ApiKeys::Parse({"a:k", "b:k"}).ok());
  EXPECT_FALSE(ApiKeys::Parse({"a::isolated"}).ok());  // an empty key with the attribute
}

}  // namespace
}  // namespace agentkv::api
