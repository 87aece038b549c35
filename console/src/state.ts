// A value that components can watch: the few pieces of state shared across the console (the language, the
// signed-in user) without a state library.
import { useEffect, useState } from 'preact/hooks';

/** A value with listeners told of each change. */
export class Signal<T> {
  private listeners = new Set<(value: T) => void>();
  constructor(private current: T) {}
  get value(): T {
    return this.current;
  }
  set value(next: T) {
    if (Object.is(next, this.current)) return;
    this.current = next;
    this.listeners.forEach((listener) => listener(next));
  }
  subscribe(listener: (value: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export function signal<T>(value: T): Signal<T> {
  return new Signal(value);
}

/** The signal's value, re-rendering the component when it changes. */
export function useSignal<T>(s: Signal<T>): T {
  const [value, setValue] = useState(s.value);
  useEffect(() => {
    setValue(s.value);
    return s.subscribe(setValue);
  }, [s]);
  return value;
}
