/*
 * test_sign.c - unit checks for os_sign_pem (os/crypto.h), the signer of
 * luamcp call's private_key_jwt assertions, on the platform it is built
 * for: crypto_posix.c (libcrypto) natively, crypto_windows.c (crypt32 +
 * CNG) under wine. Each key below (made once with OpenSSL, for this test
 * only) signs, and os_pubkey_verify checks the signature with the public
 * half; keys of the wrong kind and unreadable PEM are refused.
 *
 *   make build/tests/test_sign && build/tests/test_sign
 *   x86_64-w64-mingw32-gcc -std=c11 -Iruntime -o build/test_sign.exe runtime/os/tests/test_sign.c \
 *     runtime/os/crypto_windows.c -lbcrypt -lcrypt32 && wine build/test_sign.exe
 */
#include <stdio.h>
#include <string.h>

#include "os/crypto.h"

static int passed, failed;

#define CHECK(cond, ...)                            \
  do {                                              \
    if (cond) {                                     \
      passed++;                                     \
    } else {                                        \
      failed++;                                     \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
    }                                               \
  } while (0)

static const char EC_PKCS8[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVUZlZ1u/A+CN4XTi\n"
    "Bb7GW1TbePxRrpOgTVO/RNQjnZahRANCAAT8kRpdFdPhk+t7wDTUJz6lYoFWqKda\n"
    "pzjIU1zuAZn/9LCU/HSGbFwY6SpFMCItEe6aoqeDEY5KUeKiEuuvr+eH\n"
    "-----END PRIVATE KEY-----\n";
static const char EC_SEC1[] =
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIFVGZWdbvwPgjeF04gW+xltU23j8Ua6ToE1Tv0TUI52WoAoGCCqGSM49\n"
    "AwEHoUQDQgAE/JEaXRXT4ZPre8A01Cc+pWKBVqinWqc4yFNc7gGZ//SwlPx0hmxc\n"
    "GOkqRTAiLRHumqKngxGOSlHiohLrr6/nhw==\n"
    "-----END EC PRIVATE KEY-----\n";
static const char RSA_PKCS8[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCqf9Zi6vI43oD8\n"
    "T/y5CEcdnmArKKmqCep6Yfb25/XQXIvJa8n1V5LP0Cc61iH9tyr8HB70cqR41aUE\n"
    "VS6WKMpIxt8u5LaVGLKqOI7uU2hT7CHPidJVu+7E4agiJUlGXUVMTUNpziAtzdU4\n"
    "4ylI0MIVL1yjVXGRGWtTv/kvbK/ZsT4scBB62XKyAlpw2z5IoTW76RUbnJTPm5id\n"
    "cgg0AJb6GrZnnAN+7BRRME+U9mMYoDMRJA3DtL7E9EGM762nUReBGyDNN+Xqy1nx\n"
    "juZcFzMUB5qesvbGx1Vqu8STdyHMjorOairTA1kIWcmjN88SaLfcyCcSdzGE7fX2\n"
    "3a4V/OlfAgMBAAECggEAAIWImd/fItZnbZ4vBz/ju872u1sR/c+u9HXlRAccpOkL\n"
    "km+ue/4rGFCqNg9epkCPtJq/a38ISshYi2VZUaNJTySwnRudBWLAdS3cHhWKPat8\n"
    "xP5GcvWyus537bbQfRMe+adI3AOB7LHzA4wKXcsptNfiwCssQEXkIqr1L7R060US\n"
    "w5Ua9QT95UF84Q8V7u0ea2JVVqDIhdBZLHz4P6vLtMKc9HFR5ETDia99YPL74UOU\n"
    "gUO2Fw1ErtITXFe3BTB1yDY1Whu6q2Y+TneaFJDVJ65Ug50LF9q7Fhx51GC/ErCr\n"
    "CakyU1ud3YzrWokWRus1fAi7RxEntWdAMocQ7C1r/QKBgQDkRF1iJ5fTBULGL5lA\n"
    "BuwozIQrzHFTGT4IP1el8sfPnlS5ENsM9AiezWngk9vLAItR8SXHpSzJbUlmJ1y7\n"
    "mpopeCJ+Ce83uh9qaqY5rqd2imij2/3wA8keCWGcc3q+JDJFw9fMLq93ka7JiaXp\n"
    "ctfn9KAcpdQfnyWbFr8aGfG8+wKBgQC/NsN35sr9ND0sIqjJQQCUReTyS9JTdrCS\n"
    "fdcMh2O1aWklfLULfzLeRxdtzjT8pThJYhx28L8zJ3T/4+Gk7NHHgusl3qGzxYfs\n"
    "EOvOTIKbUry4RN5CQ4l2yLGxkYZY4sklVuGMiZagxXdpfoNz+uAZA1T4KvegL+Ot\n"
    "gzbmqobP7QKBgHog+bWiaWDF18whe2T+TywlADJO1/MV9lKDUWnAU5eJptq9YfW0\n"
    "O0h7rsIxWc9rIx9cXlJK1YOPrU2ykbLuLL0zQYEd35d5RYWyOe1yvLZ3pzTEZ0Eb\n"
    "RWeErWz/fBRvWVZqSfM8pzTaBSJfOx2EDHBWObQaJTwl8gDgUq6sYuIxAoGAX4tS\n"
    "spfc+BZhNqt+4Ukcq/ocw0FFsDTPV/OPQBBqrxwj0Pp2UG9XkJ+/QjvWWCOKc4iV\n"
    "poz3TO07Vh2dA1beH634J60N6ZEbMMbnvOaYIFqAOCcZU80BZBw2Rf7sPX/ceE7o\n"
    "VtvtKxpgZ5MyxgImdfknPPXjU+R6BJpbFXlB8aUCgYEAmzQtlPD5+/FHzX8NC+Aw\n"
    "3KpD/alISWA7/XTq2cWsjBVoehrvWp+ZKW3anN2YIzoyu7043QpRFM9+D+aO4rzk\n"
    "fxSbEj3ok8OuIPZ3IOt9JD9N+rN4x6njOtWp7gzw2gVQbx9nzJog7r5TxdAEUQT4\n"
    "k96PgIj792bj1s4FXntzqUk=\n"
    "-----END PRIVATE KEY-----\n";
static const char RSA_PKCS1[] =
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAqn/WYuryON6A/E/8uQhHHZ5gKyipqgnqemH29uf10FyLyWvJ\n"
    "9VeSz9AnOtYh/bcq/Bwe9HKkeNWlBFUulijKSMbfLuS2lRiyqjiO7lNoU+whz4nS\n"
    "VbvuxOGoIiVJRl1FTE1Dac4gLc3VOOMpSNDCFS9co1VxkRlrU7/5L2yv2bE+LHAQ\n"
    "etlysgJacNs+SKE1u+kVG5yUz5uYnXIINACW+hq2Z5wDfuwUUTBPlPZjGKAzESQN\n"
    "w7S+xPRBjO+tp1EXgRsgzTfl6stZ8Y7mXBczFAeanrL2xsdVarvEk3chzI6Kzmoq\n"
    "0wNZCFnJozfPEmi33MgnEncxhO319t2uFfzpXwIDAQABAoIBAACFiJnf3yLWZ22e\n"
    "Lwc/47vO9rtbEf3PrvR15UQHHKTpC5Jvrnv+KxhQqjYPXqZAj7Sav2t/CErIWItl\n"
    "WVGjSU8ksJ0bnQViwHUt3B4Vij2rfMT+RnL1srrOd+220H0THvmnSNwDgeyx8wOM\n"
    "Cl3LKbTX4sArLEBF5CKq9S+0dOtFEsOVGvUE/eVBfOEPFe7tHmtiVVagyIXQWSx8\n"
    "+D+ry7TCnPRxUeREw4mvfWDy++FDlIFDthcNRK7SE1xXtwUwdcg2NVobuqtmPk53\n"
    "mhSQ1SeuVIOdCxfauxYcedRgvxKwqwmpMlNbnd2M61qJFkbrNXwIu0cRJ7VnQDKH\n"
    "EOwta/0CgYEA5ERdYieX0wVCxi+ZQAbsKMyEK8xxUxk+CD9XpfLHz55UuRDbDPQI\n"
    "ns1p4JPbywCLUfElx6UsyW1JZidcu5qaKXgifgnvN7ofamqmOa6ndopoo9v98APJ\n"
    "HglhnHN6viQyRcPXzC6vd5GuyYml6XLX5/SgHKXUH58lmxa/GhnxvPsCgYEAvzbD\n"
    "d+bK/TQ9LCKoyUEAlEXk8kvSU3awkn3XDIdjtWlpJXy1C38y3kcXbc40/KU4SWIc\n"
    "dvC/Myd0/+PhpOzRx4LrJd6hs8WH7BDrzkyCm1K8uETeQkOJdsixsZGGWOLJJVbh\n"
    "jImWoMV3aX6Dc/rgGQNU+Cr3oC/jrYM25qqGz+0CgYB6IPm1omlgxdfMIXtk/k8s\n"
    "JQAyTtfzFfZSg1FpwFOXiabavWH1tDtIe67CMVnPayMfXF5SStWDj61NspGy7iy9\n"
    "M0GBHd+XeUWFsjntcry2d6c0xGdBG0VnhK1s/3wUb1lWaknzPKc02gUiXzsdhAxw\n"
    "Vjm0GiU8JfIA4FKurGLiMQKBgF+LUrKX3PgWYTarfuFJHKv6HMNBRbA0z1fzj0AQ\n"
    "aq8cI9D6dlBvV5Cfv0I71lgjinOIlaaM90ztO1YdnQNW3h+t+CetDemRGzDG57zm\n"
    "mCBagDgnGVPNAWQcNkX+7D1/3HhO6Fbb7SsaYGeTMsYCJnX5Jzz141PkegSaWxV5\n"
    "QfGlAoGBAJs0LZTw+fvxR81/DQvgMNyqQ/2pSElgO/106tnFrIwVaHoa71qfmSlt\n"
    "2pzdmCM6Mru9ON0KURTPfg/mjuK85H8UmxI96JPDriD2dyDrfSQ/TfqzeMep4zrV\n"
    "qe4M8NoFUG8fZ8yaIO6+U8XQBFEE+JPej4CI+/dm49bOBV57c6lJ\n"
    "-----END RSA PRIVATE KEY-----\n";
static const char RSA_1024[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIICdQIBADANBgkqhkiG9w0BAQEFAASCAl8wggJbAgEAAoGBAMw2IUlgRaWktPoB\n"
    "ZQYVnWs+YbhKO3YYSkBxvbaRsGA052kuJnXZlD/sjb4o8KwbqsCgGi2HGu78Zc2o\n"
    "RTZVl9625NL5uzI71chgvQ55JtCjLC/LkQaoonCIZSzgFj8Qqq418MMNY9WBmeSG\n"
    "gdqDjPWQlzCbVDe7hEEzdZgx2mYvAgMBAAECgYAAqrSVHsFbdxw4LMT9rhhjf0Km\n"
    "bWegTRgA+d4auIMQ7VtMFqB9hgZb5xPXaR7QEQ8PrfYn6+cEnMJgV4pSURk72XKT\n"
    "kmPLZKyowcl5f1pcWQhjOVnhkM7m3FNC0TAQYdQiwDHMr25DdwXN/ag4NwNSnESl\n"
    "5ackRNHmVyHb5Vr6UQJBAOwdYLcp++2F5gXWAfAtOLm98CAkaNd8mO0eLd/kTiVs\n"
    "PX+E+V+iy8PUZYK1A9kaHzVf2U+c0+h9tjUT0ZKAB00CQQDdaOsfb/nujGCgAjkA\n"
    "xVDclp1KZrwYXUQx3FvFuG/Z4HBRRtj0ZQz82dEBJ+hU3vOOWKN/G/g06tZR4b3+\n"
    "Aj1rAkBQPL+EHwlUsz7y1sH723I+dJRoZ9cU+2uAkNPoFM6Vmw3fCtIvtMPn/YKt\n"
    "g1QWb/ERE0xm6JV+mVHVAbIjRcy1AkADHyORgeaoMlp6Zw2esSl+srDtB53HSilX\n"
    "+p9gnkUVcVCkFLeiWnpgZkHIHmPsLmiIrT9A34gUVutGpEQlfKqZAkBTvjsU3aGy\n"
    "ZyvSCx7NuJZVcAQXBtvNr/Y+NaXDlEOfjpHXupyycEeMFQUCk6Cp/WQmzo35UJAH\n"
    "3mcKVUgHqX+U\n"
    "-----END PRIVATE KEY-----\n";
static const uint8_t EC_X[] = {
    0xfc, 0x91, 0x1a, 0x5d, 0x15, 0xd3, 0xe1, 0x93, 0xeb, 0x7b, 0xc0, 0x34,
    0xd4, 0x27, 0x3e, 0xa5, 0x62, 0x81, 0x56, 0xa8, 0xa7, 0x5a, 0xa7, 0x38,
    0xc8, 0x53, 0x5c, 0xee, 0x01, 0x99, 0xff, 0xf4,
};
static const uint8_t EC_Y[] = {
    0xb0, 0x94, 0xfc, 0x74, 0x86, 0x6c, 0x5c, 0x18, 0xe9, 0x2a, 0x45, 0x30,
    0x22, 0x2d, 0x11, 0xee, 0x9a, 0xa2, 0xa7, 0x83, 0x11, 0x8e, 0x4a, 0x51,
    0xe2, 0xa2, 0x12, 0xeb, 0xaf, 0xaf, 0xe7, 0x87,
};
static const uint8_t RSA_N[] = {
    0xaa, 0x7f, 0xd6, 0x62, 0xea, 0xf2, 0x38, 0xde, 0x80, 0xfc, 0x4f, 0xfc,
    0xb9, 0x08, 0x47, 0x1d, 0x9e, 0x60, 0x2b, 0x28, 0xa9, 0xaa, 0x09, 0xea,
    0x7a, 0x61, 0xf6, 0xf6, 0xe7, 0xf5, 0xd0, 0x5c, 0x8b, 0xc9, 0x6b, 0xc9,
    0xf5, 0x57, 0x92, 0xcf, 0xd0, 0x27, 0x3a, 0xd6, 0x21, 0xfd, 0xb7, 0x2a,
    0xfc, 0x1c, 0x1e, 0xf4, 0x72, 0xa4, 0x78, 0xd5, 0xa5, 0x04, 0x55, 0x2e,
    0x96, 0x28, 0xca, 0x48, 0xc6, 0xdf, 0x2e, 0xe4, 0xb6, 0x95, 0x18, 0xb2,
    0xaa, 0x38, 0x8e, 0xee, 0x53, 0x68, 0x53, 0xec, 0x21, 0xcf, 0x89, 0xd2,
    0x55, 0xbb, 0xee, 0xc4, 0xe1, 0xa8, 0x22, 0x25, 0x49, 0x46, 0x5d, 0x45,
    0x4c, 0x4d, 0x43, 0x69, 0xce, 0x20, 0x2d, 0xcd, 0xd5, 0x38, 0xe3, 0x29,
    0x48, 0xd0, 0xc2, 0x15, 0x2f, 0x5c, 0xa3, 0x55, 0x71, 0x91, 0x19, 0x6b,
    0x53, 0xbf, 0xf9, 0x2f, 0x6c, 0xaf, 0xd9, 0xb1, 0x3e, 0x2c, 0x70, 0x10,
    0x7a, 0xd9, 0x72, 0xb2, 0x02, 0x5a, 0x70, 0xdb, 0x3e, 0x48, 0xa1, 0x35,
    0xbb, 0xe9, 0x15, 0x1b, 0x9c, 0x94, 0xcf, 0x9b, 0x98, 0x9d, 0x72, 0x08,
    0x34, 0x00, 0x96, 0xfa, 0x1a, 0xb6, 0x67, 0x9c, 0x03, 0x7e, 0xec, 0x14,
    0x51, 0x30, 0x4f, 0x94, 0xf6, 0x63, 0x18, 0xa0, 0x33, 0x11, 0x24, 0x0d,
    0xc3, 0xb4, 0xbe, 0xc4, 0xf4, 0x41, 0x8c, 0xef, 0xad, 0xa7, 0x51, 0x17,
    0x81, 0x1b, 0x20, 0xcd, 0x37, 0xe5, 0xea, 0xcb, 0x59, 0xf1, 0x8e, 0xe6,
    0x5c, 0x17, 0x33, 0x14, 0x07, 0x9a, 0x9e, 0xb2, 0xf6, 0xc6, 0xc7, 0x55,
    0x6a, 0xbb, 0xc4, 0x93, 0x77, 0x21, 0xcc, 0x8e, 0x8a, 0xce, 0x6a, 0x2a,
    0xd3, 0x03, 0x59, 0x08, 0x59, 0xc9, 0xa3, 0x37, 0xcf, 0x12, 0x68, 0xb7,
    0xdc, 0xc8, 0x27, 0x12, 0x77, 0x31, 0x84, 0xed, 0xf5, 0xf6, 0xdd, 0xae,
    0x15, 0xfc, 0xe9, 0x5f,
};

static const uint8_t RSA_E[] = {0x01, 0x00, 0x01};
static const char MESSAGE[] = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJjbGllbnQifQ";

/* pem signs MESSAGE by alg, and key verifies it; or, with key NULL, pem is
 * refused with a reason containing want. */
static void sign_and_verify(const char *name, const char *pem, os_sig_alg alg, const os_pubkey *key,
                            const char *want) {
  uint8_t sig[OS_SIG_MAX_BYTES];
  size_t sig_len = 0;
  char why[200] = "";
  bool ok = os_sign_pem(pem, strlen(pem), alg, MESSAGE, strlen(MESSAGE), sig, &sig_len, why, sizeof why);
  if (!key) {
    CHECK(!ok, "%s: refused", name);
    CHECK(strstr(why, want) != NULL, "%s: the reason says '%s' (it says '%s')", name, want, why);
    return;
  }
  CHECK(ok, "%s: signs (%s)", name, why);
  if (!ok) return;
  CHECK(sig_len == (alg == OS_SIG_ES256 ? 64u : 256u), "%s: a signature of %u bytes", name, (unsigned)sig_len);
  CHECK(os_pubkey_verify(key, alg, MESSAGE, strlen(MESSAGE), sig, sig_len), "%s: the public key verifies it", name);
  sig[0] ^= 1;
  CHECK(!os_pubkey_verify(key, alg, MESSAGE, strlen(MESSAGE), sig, sig_len), "%s: a changed signature fails", name);
}

int main(void) {
  char why[200];
  os_pubkey *ec = os_pubkey_import("EC", "P-256", EC_X, sizeof EC_X, EC_Y, sizeof EC_Y, why, sizeof why);
  os_pubkey *rsa = os_pubkey_import("RSA", NULL, RSA_N, sizeof RSA_N, RSA_E, sizeof RSA_E, why, sizeof why);
  CHECK(ec && rsa, "the public keys import (%s)", why);
  if (!ec || !rsa) return 1;
  sign_and_verify("EC P-256, PKCS#8", EC_PKCS8, OS_SIG_ES256, ec, NULL);
  sign_and_verify("EC P-256, SEC1", EC_SEC1, OS_SIG_ES256, ec, NULL);
  sign_and_verify("RSA 2048, PKCS#8", RSA_PKCS8, OS_SIG_RS256, rsa, NULL);
  sign_and_verify("RSA 2048, PKCS#1", RSA_PKCS1, OS_SIG_RS256, rsa, NULL);
  sign_and_verify("an RSA key for ES256", RSA_PKCS8, OS_SIG_ES256, NULL, "ES256 needs an EC P-256 private key");
  sign_and_verify("an EC key for RS256", EC_PKCS8, OS_SIG_RS256, NULL, "RS256 needs an RSA private key");
  sign_and_verify("RSA 1024", RSA_1024, OS_SIG_RS256, NULL, "2048 bits");
  sign_and_verify("not PEM", "hello", OS_SIG_ES256, NULL, "no PEM private key");
  sign_and_verify("PS256", EC_PKCS8, OS_SIG_PS256, NULL, "only ES256 and RS256");
  os_pubkey_free(ec);
  os_pubkey_free(rsa);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
