// Secrets are few (one per endpoint, two while rotating), so a full cache is simply emptied: it
// only fills up when a caller derives secrets per request, and then it must not grow unbounded.
const MAX_KEYS = 32;

/** Memoises the key made from each secret: preparing a key costs more than a small HMAC. */
export function keyCache<Key>(make: (secret: string) => Key): (secret: string) => Key {
  const keys = new Map<string, Key>();
  return (secret) => {
    let key = keys.get(secret);
    if (key === undefined) {
      if (keys.size >= MAX_KEYS) keys.clear();
      key = make(secret);
      keys.set(secret, key);
    }
    return key;
  };
}
