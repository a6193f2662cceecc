#include "api/auth.h"

#include <gtest/gtest.h>

#include "util/names.h"

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
  EXPECT_EQ(iso->namespace_id, IsolatedNamespace("team", "sk-iso"));
  EXPECT_TRUE(iso->isolated);
  EXPECT_FALSE(keys->Authenticate("Bearer sk-iso:isolated").ok());  // the attribute is not part of the key
  EXPECT_FALSE(keys->AuthenticateTenant("Bearer sk-open")->isolated);
  EXPECT_EQ(*keys->Authenticate("Bearer sk:x"), "other");  // other colons stay in the key
  EXPECT_FALSE(ApiKeys().AuthenticateTenant("")->isolated);
}

// Issue 29, finding 4: an isolated key is its own trust domain, so its
// agents (explicit ids and session headers included) live in a namespace of
// their own: not NAME's, not another isolated key's of the same NAME, the
// same after a restart (it is what the store keeps them under), a valid
// namespace, and without the key in it.
TEST(AuthTest, IsolatedKeyHasANamespaceOfItsOwn) {
  Result<ApiKeys> keys = ApiKeys::Parse({"team:sk-iso:isolated", "team:sk-iso2:isolated", "team:sk-open"});
  ASSERT_TRUE(keys.ok());
  const std::string iso = *keys->Authenticate("Bearer sk-iso");
  const std::string iso2 = *keys->Authenticate("Bearer sk-iso2");
  const std::string open = *keys->Authenticate("Bearer sk-open");
  EXPECT_EQ(open, "team");
  EXPECT_NE(iso, open);
  EXPECT_NE(iso, iso2);
  EXPECT_EQ(iso.rfind("team.isolated-", 0), 0u) << iso;
  EXPECT_EQ(iso.size(), std::string("team.isolated-").size() + kIsolatedHashChars);
  EXPECT_EQ(iso.find("sk-iso"), std::string::npos);
  EXPECT_TRUE(ValidateName("namespace", iso).ok());
  EXPECT_EQ(*ApiKeys::Parse({"team:sk-iso:isolated"})->Authenticate("Bearer sk-iso"), iso);  // stable
  // The longest NAME an isolated key may have still gives a valid namespace.
  const std::string longest(kMaxIsolatedNameBytes, 'n');
  Result<ApiKeys> long_keys = ApiKeys::Parse({longest + ":sk:isolated"});
  ASSERT_TRUE(long_keys.ok()) << long_keys.status().ToString();
  EXPECT_TRUE(ValidateName("namespace", *long_keys->Authenticate("Bearer sk")).ok());
  // No configured NAME can be (or collide with) an isolated key's namespace.
  EXPECT_FALSE(ApiKeys::Parse({iso + ":sk-other"}).ok());
  EXPECT_FALSE(ApiKeys::Parse({"a.isolated-b:sk"}).ok());
  EXPECT_FALSE(ApiKeys::Parse({longest + "n:sk:isolated"}).ok());
  EXPECT_TRUE(ApiKeys::Parse({longest + "n:sk"}).ok());  // the bound is for isolated keys only
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
